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

    /// Reads the text form. The first part, when it has no `=`, is the tag; any other part
    /// without `=`, or with nothing before it, is skipped; for a repeated key the first value
    /// counts (``subscript(_:)``).
    public init(decoding bytes: [UInt8]) {
        tag = nil
        fields = []
        let parts = String(decoding: bytes, as: UTF8.self).split(separator: ";", omittingEmptySubsequences: false)
        for (index, part) in parts.enumerated() where !part.isEmpty {
            let pair = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            if pair.count == 2, !pair[0].isEmpty {
                fields.append(Field(key: String(pair[0]), value: String(pair[1])))
            } else if index == 0, !part.contains("=") {
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
