/// Port arithmetic on endpoint strings (`tcp://host:PORT`, `host:PORT`): a replica's ports, the
/// events endpoint beside a request endpoint, the supervisor's public endpoint beside its control
/// one, the port a RetroArch LAN announcement names.
public enum EndpointPorts {
    /// The trailing port of `endpoint`, if it has a numeric one.
    public static func port(of endpoint: String) -> Int? {
        guard let colon = endpoint.lastIndex(of: ":") else { return nil }
        let digits = endpoint[endpoint.index(after: colon)...]
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber) else { return nil }
        return Int(digits)
    }

    /// `endpoint` with its port moved by `delta` (unchanged when it has no numeric port, the
    /// port is 0, which means "any", or the sum does not fit an Int: a port that large fails
    /// the endpoint's validation, with a line naming it, instead of trapping here).
    public static func shift(_ endpoint: String, by delta: Int) -> String {
        guard delta != 0, let port = port(of: endpoint), port != 0, let colon = endpoint.lastIndex(of: ":") else {
            return endpoint
        }
        let (shifted, overflow) = port.addingReportingOverflow(delta)
        return overflow ? endpoint : String(endpoint[...colon]) + String(shifted)
    }
}
