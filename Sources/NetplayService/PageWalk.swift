/// Following a paged listing's next-page tokens to its end, under the one rule every client of
/// a paged listing keeps: the pages must move on.
///
/// The toolkit's own services never answer an empty page with a next-page token, never hand out
/// a token twice (a token names the last entry of its page, and entries come in id order), and
/// end a listing of a million rooms in a few thousand pages. A service that breaks any of these
/// would keep its client asking forever: the walk refuses it with a ``PageWalkError`` instead.
/// netplayctl's `--all` listings, NetplayKit's lobby listings and room watches, and Discovery's
/// `RoomWatchClient` all walk their pages with it.
public struct PageWalk: Sendable {
    /// What is walked, as the errors name it ("the rooms listing", "discovery's room snapshot").
    public let listing: String
    /// The most pages one walk takes.
    public let maxPages: Int
    /// Pages received so far.
    public private(set) var pages = 0
    private var tokens: Set<String> = []

    /// A walk over what `listing` names, of `maxPages` pages at most.
    public init(listing: String, maxPages: Int = 10_000) {
        self.listing = listing
        self.maxPages = maxPages
    }

    /// Checks the page just received (`count` entries, `nextToken`) and returns the token to ask
    /// with next ("" when the walk is over).
    public mutating func next(after count: Int, nextToken: String) throws(PageWalkError) -> String {
        pages += 1
        guard !nextToken.isEmpty else { return "" }
        guard count > 0 else {
            throw PageWalkError("\(listing) sent an empty page with a next-page token")
        }
        guard tokens.insert(nextToken).inserted else {
            throw PageWalkError("\(listing) sent a next-page token it had sent before: its pages go round in a circle")
        }
        guard pages < maxPages else {
            throw PageWalkError("\(listing) did not end after \(maxPages) pages")
        }
        return nextToken
    }
}

/// Why a ``PageWalk`` stopped following a listing: its pages did not move on.
public struct PageWalkError: Error, CustomStringConvertible, Sendable {
    /// What the listing did, in one line.
    public let description: String

    /// An error saying `description`.
    public init(_ description: String) { self.description = description }
}
