import Foundation
import NetplayTestSupport

/// The C side of these tests: libNetplayC as built and the C programs in `c/` compiled against it
/// with `cc` (only netplay.h, and libretro's API for the core); nestopia and the NES test ROM come
/// from ``LibretroFixtures``, which makes each once per test process; anything missing fails the
/// test with an explanation.
enum CFrontend {
    /// The package's root (this file is Tests/CAPITests/CFrontend.swift).
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    /// `c/<name>.c` compiled against libNetplayC (once per process); its path.
    static func compile(_ name: String) throws -> String {
        try LibretroFixtures.cached("capi:" + name) { try build(name) }
    }

    private static func build(_ name: String) throws -> String {
        let products = BuildProducts.directory.path
        guard FileManager.default.fileExists(atPath: products + "/libNetplayC.so") else {
            throw LibretroFixtures.Missing("libNetplayC.so is not built in \(products): run `swift build --build-tests` (or --product NetplayC)")
        }
        let output = try LibretroFixtures.scratchDirectory() + "/" + name
        try LibretroFixtures.runTool("cc", what: "\(name).c", [
            "-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-o", output, root + "/Tests/CAPITests/c/\(name).c",
            "-I", root + "/Sources/CNetplayAPI/include", "-I", root + "/Sources/CLibretro/include",
            "-L", products, "-lNetplayC", "-ldl", "-Wl,-rpath," + products,
        ])
        return output
    }
}
