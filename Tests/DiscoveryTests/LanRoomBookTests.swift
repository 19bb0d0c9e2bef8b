@testable import Discovery
import Testing
import NetplayTestSupport

@Suite("LAN room bounds per source address and in total", .ownThread)
struct LanRoomBookTests {
    @Test func aSourceAtItsBoundEvictsItsOwnOldestRoom() {
        var book = LanRoomBook(maxPerSource: 2, maxTotal: 10)
        var live: Set<String> = []
        func admit(_ id: String, _ source: UInt32) -> [String] {
            let evicted = book.admit(id, from: source, isLive: { live.contains($0) })
            live.insert(id)
            live.subtract(evicted)
            return evicted
        }
        #expect(admit("a1", 1) == [] && admit("b1", 2) == [] && admit("a2", 1) == [])
        #expect(admit("a1", 1) == [], "hearing a room again refreshes it, evicting nothing")
        #expect(admit("a3", 1) == ["a2"], "a2 is now the least recently heard of source 1")
        #expect(book.count(from: 1) == 2 && book.count(from: 2) == 1)
        #expect(book.holds("a1", from: 1) && !book.holds("a2", from: 1) && !book.holds("a1", from: 2))
    }

    @Test func theTotalBoundEvictsTheOldestOfAll() {
        var book = LanRoomBook(maxPerSource: 4, maxTotal: 3)
        var live: Set<String> = []
        for (id, source) in [("x", UInt32(1)), ("y", 2), ("z", 3)] {
            #expect(book.admit(id, from: source, isLive: { live.contains($0) }).isEmpty)
            live.insert(id)
        }
        #expect(book.admit("x", from: 1, isLive: { live.contains($0) }).isEmpty)
        #expect(book.admit("w", from: 4, isLive: { live.contains($0) }) == ["y"])
        #expect(book.count == 3)
    }

    @Test func roomsThatLeftTheRegistryFreeTheirPlace() {
        var book = LanRoomBook(maxPerSource: 1, maxTotal: 2)
        #expect(book.admit("a", from: 1, isLive: { _ in true }).isEmpty)
        #expect(book.admit("b", from: 2, isLive: { _ in true }).isEmpty)
        #expect(book.admit("c", from: 1, isLive: { $0 != "a" }).isEmpty, "a expired: no eviction needed")
        book.forget("b")
        #expect(book.admit("d", from: 3, isLive: { _ in true }).isEmpty)
        #expect(book.count == 2)
    }
}
