/// What a game records in a replay header (and a match's settings) so the same game can be built
/// again: `key=value` fields joined by `;`, after an optional leading tag that has no `=`
/// (`libretro;players=2;buttons=ff`, `game=arena;players=2;seed=7`). The one reader and writer
/// of that text for every game that records options. Keys and values are the game's own short
/// words and numbers: they hold neither `;` nor `=`.
public struct GameOptions: Sendable, Equatable {
    /// The leading word without `=` (`libretro`), if any.
    public var tag: String?
    /// The fields in the order they are written.
    public var fields: [Field]

    /// One `key=value` field.
    public struct Field: Sendable, Equatable {
        /// The key.
        public var key: String
        /// The value.
        public var value: String
    }

    /// Options with `tag` and these fields, in this order.
    public init(tag: String? = nil, _ fields: KeyValuePairs<String, String>) {
        self.tag = tag
        self.fields = fields.map { Field(key: $0.key, value: $0.value) }
    }

    /// Reads the text form. A first part without `=` is the tag; a later part without `=` is
    /// skipped; for a repeated key the first value counts.
    public init(decoding bytes: [UInt8]) {
        tag = nil
        fields = []
        for (index, part) in String(decoding: bytes, as: UTF8.self).split(separator: ";").enumerated() {
            let pair = part.split(separator: "=", maxSplits: 1)
            if pair.count == 2 {
                fields.append(Field(key: String(pair[0]), value: String(pair[1])))
            } else if index == 0 {
                tag = String(part)
            }
        }
    }

    /// The text form, as bytes.
    public var bytes: [UInt8] {
        Array(((tag.map { [$0] } ?? []) + fields.map { "\($0.key)=\($0.value)" }).joined(separator: ";").utf8)
    }

    /// The value of the first field named `key`.
    public subscript(key: String) -> String? {
        fields.first { $0.key == key }?.value
    }
}
