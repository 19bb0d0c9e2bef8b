import ArgumentParser

/// `--all` over a paged listing: the pages must move on. A service that answers an empty page
/// with a next-page token, or hands back a token it gave before, would keep netplayctl asking
/// forever; that is one line and a non-zero exit instead.
struct PageWalk {
    /// What is listed, for the error ("rooms", "sessions").
    let listing: String
    private var tokens: Set<String> = []

    init(listing: String) { self.listing = listing }

    /// Checks the page just received (`count` entries, `nextToken`) and returns the token to ask
    /// with next ("" when the walk is over).
    mutating func next(after count: Int, nextToken: String) throws -> String {
        guard !nextToken.isEmpty else { return "" }
        guard count > 0 else { throw ValidationError("the \(listing) listing sent an empty page with a next-page token") }
        guard tokens.insert(nextToken).inserted else {
            throw ValidationError("the \(listing) listing sent a next-page token it had sent before: its pages go round in a circle")
        }
        return nextToken
    }
}
