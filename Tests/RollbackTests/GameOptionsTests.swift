import Testing
import NetplayTestSupport
import Rollback

@Suite("GameOptions: the key=value text a replay header records", .ownThread)
struct GameOptionsTests {
    @Test func writesTheTagThenTheFieldsInOrder() {
        let options = GameOptions(tag: "libretro", ["players": "2", "buttons": "ff", "initial": "1a2b"])
        #expect(String(decoding: options.bytes, as: UTF8.self) == "libretro;players=2;buttons=ff;initial=1a2b")
        #expect(String(decoding: GameOptions(["game": "arena", "seed": "7"]).bytes, as: UTF8.self) == "game=arena;seed=7")
        #expect(GameOptions([:]).bytes.isEmpty)
    }

    @Test func readsWhatItWrote() {
        let written = GameOptions(tag: "libretro", ["players": "4", "buttons": "0fff"])
        let read = GameOptions(decoding: written.bytes)
        #expect(read == written)
        #expect(read.tag == "libretro" && read["players"] == "4" && read["buttons"] == "0fff" && read["seed"] == nil)
    }

    @Test func readsTextFromOlderRecordingsAndSkipsWhatIsNotAField() {
        // What replays recorded before the type existed: no tag, and fields in another order.
        let old = GameOptions(decoding: Array("players=2;game=pd;seed=99".utf8))
        #expect(old.tag == nil && old["game"] == "pd" && old["players"] == "2" && old["seed"] == "99")
        // A later word without '=' is no tag; an empty part is nothing; '=' inside a value stays.
        let odd = GameOptions(decoding: Array("a=1;stray;;b=x=y;a=2".utf8))
        #expect(odd.tag == nil)
        #expect(odd.fields.map(\.key) == ["a", "b", "a"])
        #expect(odd["a"] == "1" && odd["b"] == "x=y")
        #expect(GameOptions(decoding: []) == GameOptions([:]))
        // A first part with '=' is a field, not the tag; a tag only stands first.
        let untagged = GameOptions(decoding: Array("game=;x=1".utf8))
        #expect(untagged.tag == nil && untagged["game"] == "" && untagged["x"] == "1")
        #expect(GameOptions(decoding: Array(";libretro;players=2".utf8)).tag == nil)
        #expect(GameOptions(decoding: Array("=5;k=v".utf8)).fields.map(\.key) == ["k"], "a field needs a key")
        #expect(GameOptions(decoding: [0xFF, 0x3B, 0x3D]).fields.isEmpty, "bytes that are not UTF-8 read as no fields, not a crash")
    }
}
