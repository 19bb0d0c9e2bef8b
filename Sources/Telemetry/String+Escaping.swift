extension String {
    /// `self` with every scalar that `replacements` names written as its replacement text, and
    /// every other scalar as it is: the one loop behind the dashboard's `<script>`-safe JSON and
    /// Prometheus label values, which differ only in their tables.
    func replacingScalars(_ replacements: [Unicode.Scalar: String]) -> String {
        var out = ""
        out.reserveCapacity(utf8.count)
        for scalar in unicodeScalars {
            if let replacement = replacements[scalar] {
                out += replacement
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
