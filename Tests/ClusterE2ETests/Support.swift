import Foundation
import NetplayTestSupport
import Synchronization

// Test helpers shared in spirit with TelemetryTests/Support.swift (test targets cannot share files).

/// A minimal HTTP/1.1 GET for tests: status and body.
func httpGet(_ address: String, _ path: String, timeout: Double = 3) -> (status: Int, headers: String, body: String)? {
    guard let colon = address.lastIndex(of: ":"), let port = UInt16(address[address.index(after: colon)...]) else { return nil }
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var tv = timeval(tv_sec: Int(timeout), tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = port.bigEndian
    inet_pton(AF_INET, String(address[..<colon]), &addr.sin_addr)
    let connected = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    guard connected == 0 else { return nil }
    let request = "GET \(path) HTTP/1.1\r\nHost: \(address)\r\nConnection: close\r\n\r\n"
    _ = request.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
    var data = [UInt8]()
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count <= 0 { break }
        data += buffer[0..<count]
    }
    let text = String(decoding: data, as: UTF8.self)
    guard let split = text.range(of: "\r\n\r\n") else { return nil }
    let head = String(text[..<split.lowerBound])
    let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
    return (status, head, String(text[split.upperBound...]))
}

/// Parses a JSON object body.
func jsonObject(_ text: String) -> [String: Any]? {
    (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
}


/// Runs a command that leaves a daemon behind (`make up-detached`): spawned with
/// posix_spawn and only stdin/stdout/stderr inherited, output to a file, status from waitpid.
/// (Foundation's Process learns of an exit from a socket the child inherits; a daemon that
/// inherits it too would keep it open, and the Process would never finish.)
func runLeavingDaemon(_ executable: String, _ arguments: [String], environment: [String: String], timeout: Double) -> (status: Int32?, output: String) {
    let outputPath = FileManager.default.temporaryDirectory.appendingPathComponent("netplay-spawn-\(UUID().uuidString).out").path
    defer { unlink(outputPath) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    posix_spawn_file_actions_adddup2(&actions, 1, 2)
    let argv = ([executable] + arguments).map { strdup($0) } + [nil]
    let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer { for pointer in argv + envp { free(pointer) } }
    var pid: pid_t = 0
    guard posix_spawn(&pid, executable, &actions, nil, argv, envp) == 0 else { return (nil, "posix_spawn failed") }
    let deadline = Date().addingTimeInterval(timeout)
    var status: Int32 = 0
    var exited = false
    while Date() < deadline {
        if waitpid(pid, &status, WNOHANG) == pid { exited = true; break }
        usleep(20_000)
    }
    if !exited { kill(pid, SIGKILL); waitpid(pid, &status, 0) }
    let output = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
    return (exited ? (status >> 8) & 0xff : nil, output)
}
