import Foundation

/// A blocking TCP connection to `address` (HOST:PORT) with a receive timeout, or -1;
/// `receiveBuffer` sets SO_RCVBUF before connecting (a small one keeps a response in the
/// server's send queue while the client does not read).
public func tcpConnect(_ address: String, timeout: Int = 3, receiveBuffer: Int32? = nil) -> Int32 {
    guard let colon = address.lastIndex(of: ":"), let port = UInt16(address[address.index(after: colon)...]) else { return -1 }
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return -1 }
    var tv = timeval(tv_sec: timeout, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    if var size = receiveBuffer { setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size)) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = port.bigEndian
    inet_pton(AF_INET, String(address[..<colon]), &addr.sin_addr)
    let connected = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    if connected != 0 { close(fd); return -1 }
    return fd
}

/// Sends `bytes` on a fresh connection to `address` and returns everything answered until the
/// server closes (or the timeout); nil when nothing could connect.
public func tcpExchange(_ address: String, _ bytes: [UInt8], timeout: Int = 3) -> [UInt8]? {
    let fd = tcpConnect(address, timeout: timeout)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    var data = [UInt8]()
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count <= 0 { break }
        data += buffer[0..<count]
    }
    return data
}

/// A minimal HTTP/1.1 GET for tests: status, head and body.
public func httpGet(_ address: String, _ path: String, timeout: Double = 3) -> (status: Int, headers: String, body: String)? {
    let request = "GET \(path) HTTP/1.1\r\nHost: \(address)\r\nConnection: close\r\n\r\n"
    guard let data = tcpExchange(address, Array(request.utf8), timeout: Int(timeout.rounded(.up))) else { return nil }
    let text = String(decoding: data, as: UTF8.self)
    guard let split = text.range(of: "\r\n\r\n") else { return nil }
    let head = String(text[..<split.lowerBound])
    let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
    return (status, head, String(text[split.upperBound...]))
}

/// Parses a JSON object body.
public func jsonObject(_ text: String) -> [String: Any]? {
    (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
}
