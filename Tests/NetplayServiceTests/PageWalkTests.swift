import NetplayTestSupport
import Testing
@testable import NetplayService

@Suite("PageWalk: a paged listing's pages must move on", .ownThread)
struct PageWalkTests {
    @Test func anHonestListingIsFollowedToItsEnd() throws {
        var walk = PageWalk(listing: "the rooms listing")
        #expect(try walk.next(after: 100, nextToken: "r1.61") == "r1.61")
        #expect(try walk.next(after: 100, nextToken: "r1.62") == "r1.62")
        #expect(try walk.next(after: 7, nextToken: "") == "")
        #expect(walk.pages == 3)
    }

    @Test func anEmptyLastPageEndsTheWalk() throws {
        var walk = PageWalk(listing: "the rooms listing")
        #expect(try walk.next(after: 0, nextToken: "") == "")
    }

    @Test func anEmptyPageWithATokenIsRefused() {
        var walk = PageWalk(listing: "the sessions listing")
        let error = #expect(throws: PageWalkError.self) { try walk.next(after: 0, nextToken: "more") }
        #expect(error?.description == "the sessions listing sent an empty page with a next-page token")
    }

    /// Not only the previous token: any token sent before (a circle of three).
    @Test func aTokenSentBeforeIsRefused() throws {
        var walk = PageWalk(listing: "the rooms listing")
        for token in ["a", "b", "c"] { _ = try walk.next(after: 1, nextToken: token) }
        let error = #expect(throws: PageWalkError.self) { try walk.next(after: 1, nextToken: "a") }
        #expect(error?.description.contains("its pages go round in a circle") == true)
    }

    @Test func theWalkStopsAtItsPageLimit() throws {
        var walk = PageWalk(listing: "the rooms listing", maxPages: 3)
        _ = try walk.next(after: 1, nextToken: "a")
        _ = try walk.next(after: 1, nextToken: "b")
        let error = #expect(throws: PageWalkError.self) { try walk.next(after: 1, nextToken: "c") }
        #expect(error?.description == "the rooms listing did not end after 3 pages")
        // The last page of a listing exactly at the limit is no fault.
        var exact = PageWalk(listing: "the rooms listing", maxPages: 2)
        _ = try exact.next(after: 1, nextToken: "a")
        #expect(try exact.next(after: 1, nextToken: "") == "")
    }
}

/// Page tokens fit the wire's 128 characters for any room id (64 bytes at most): the hex form
/// made 131 for a 64-byte id, the page ending at it failed to encode, and every listing and
/// watch reaching it got INTERNAL.
@Suite("Page tokens", .ownThread)
struct PageTokenTests {
    @Test func everyRoomIdRoundTripsWithinTheWireLimit() throws {
        for id in [String(repeating: "z", count: 64), "lan:192.168.1.12:" + String(repeating: "\u{3042}", count: 15), "a", "?>~", "r"] {
            let token = PageToken.after(id)
            #expect(token.count <= 128 && token.hasPrefix("r2."), "\(token.count): \(token)")
            #expect(try PageToken.decode(token, field: "f") == id)
        }
        // Tokens handed out before (hex) are still taken.
        #expect(try PageToken.decode("r1.616263", field: "f") == "abc")
        for bad in ["r2.", "r2.%%%", "r2.YQ==", "r1.zz", "x1.61", "r2.__8"] {
            #expect(throws: ServiceError.self, "\(bad)") { try PageToken.decode(bad, field: "f") }
        }
    }
}
