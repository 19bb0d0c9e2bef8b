import CYaml

/// Finds the first YAML alias (`*name`) of a text from libyaml's event stream, before Yams
/// composes the document.
///
/// Composing is where an alias bomb costs: Yams checks a mapping's keys for duplicates by hashing
/// each key node whole, and an alias used as a key hashes its anchor's node expanded, 10^N
/// values for N nested anchors of ten aliases each. A 300-byte file held the supervisor (and
/// `--check`) at full CPU for good, before the refusal of aliases in ``ClusterFileParser`` could
/// see one. The event stream does not expand anything: an alias is one event, found in one pass.
///
/// `CYaml` is the libyaml that Yams builds and links (its own module, imported here for its
/// parser's events; Yams exposes none), so no second copy of libyaml's symbols is linked.
enum YAMLAliasScan {
    /// The 1-based line and column of the first alias in `text`, or nil when it has none or
    /// libyaml stops at an error first (composing reports that error).
    static func firstAlias(in text: String) -> (line: Int, column: Int)? {
        // Allocated: libyaml keeps a pointer to the parser inside it (the string input's
        // state), which `&parser` of a Swift variable guarantees only for each call.
        let parser = UnsafeMutablePointer<yaml_parser_t>.allocate(capacity: 1)
        defer { parser.deallocate() }
        parser.initialize(to: yaml_parser_t())
        guard yaml_parser_initialize(parser) == 1 else { return nil }
        defer { yaml_parser_delete(parser) }
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBufferPointer { buffer -> (line: Int, column: Int)? in
            guard let base = buffer.baseAddress else { return nil }
            yaml_parser_set_input_string(parser, base, buffer.count)
            while true {
                var event = yaml_event_t()
                guard yaml_parser_parse(parser, &event) == 1 else { return nil }
                defer { yaml_event_delete(&event) }
                switch event.type {
                case YAML_ALIAS_EVENT:
                    return (Int(event.start_mark.line) + 1, Int(event.start_mark.column) + 1)
                case YAML_STREAM_END_EVENT:
                    return nil
                default:
                    continue
                }
            }
        }
    }
}
