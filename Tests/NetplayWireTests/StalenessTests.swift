import Foundation
import Testing
import NetplayTestSupport

/// The committed protoc-c output, Swift types and fixtures must be what tools/gen-proto.sh makes
/// from proto/ today.
@Suite("Generated code", .ownThread)
struct StalenessTests {
    static let generatedPaths = [
        "Sources/CNetplayProto/include/netplay",
        "Sources/CNetplayProto/include/CNetplayProto.h",
        "Sources/CNetplayProto/include/module.modulemap",
        "Sources/CNetplayProto/netplay",
        "Sources/NetplayWire/Generated",
        "Tests/NetplayWireTests/Generated",
    ]

    /// The repository root, found from this file (resolving symlinks).
    static var root: URL {
        URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    static func files(under url: URL) -> [String: Data] {
        var out: [String: Data] = [:]
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else { return out }
        if !isDirectory.boolValue {
            out[""] = FileManager.default.contents(atPath: url.path)
            return out
        }
        let enumerator = FileManager.default.enumerator(at: url, includingPropertiesForKeys: [.isRegularFileKey])
        while let file = enumerator?.nextObject() as? URL {
            guard (try? file.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true else { continue }
            let relative = String(file.path.dropFirst(url.path.count))
            out[relative] = FileManager.default.contents(atPath: file.path)
        }
        return out
    }

    @Test("committed generated code matches proto/ (otherwise: run make proto)")
    func notStale() throws {
        let root = Self.root
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("netplay-gen-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: out) }

        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["bash", root.appendingPathComponent("tools/gen-proto.sh").path, "--out", out.path]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let log = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "tools/gen-proto.sh failed (run make deps?):\n\(log)")

        var stale: [String] = []
        for path in Self.generatedPaths {
            let committed = Self.files(under: root.appendingPathComponent(path))
            let fresh = Self.files(under: out.appendingPathComponent(path))
            for name in Set(committed.keys).union(fresh.keys).sorted() where committed[name] != fresh[name] {
                let what = committed[name] == nil ? "missing" : fresh[name] == nil ? "no longer generated" : "differs"
                stale.append("\(path)\(name) (\(what))")
            }
        }
        #expect(stale.isEmpty, "generated code is stale, run make proto: \(stale.joined(separator: ", "))")
    }
}
