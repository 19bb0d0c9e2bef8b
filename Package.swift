// swift-tools-version: 6.1
// The Netplay toolkit: separate services over ZeroMQ + protobuf-c, a rollback engine,
// and the client SDK. Targets are listed by layer, lowest first. See README.md and docs/.
import CompilerPluginSupport
import PackageDescription

let package = Package(
    name: "Netplay",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Rollback", targets: ["Rollback"]),
        .library(name: "Games", targets: ["Games"]),
        .library(name: "Libretro", targets: ["Libretro"]),
        .library(name: "NetplayWire", targets: ["NetplayWire"]),
        .library(name: "NetplayService", targets: ["NetplayService"]),
        .library(name: "Telemetry", targets: ["Telemetry"]),
        .library(name: "Supervisor", targets: ["Supervisor"]),
        .executable(name: "netplay-telemetry", targets: ["netplay-telemetry"]),
        .executable(name: "netplay-supervisor", targets: ["netplay-supervisor"]),
        .executable(name: "netplayctl", targets: ["netplayctl"]),
        .library(name: "NetplayAuth", targets: ["NetplayAuth"]),
        .library(name: "Discovery", targets: ["Discovery"]),
        .executable(name: "netplay-discovery", targets: ["netplay-discovery"]),
        .library(name: "Coordinator", targets: ["Coordinator"]),
        .executable(name: "netplay-coordinator", targets: ["netplay-coordinator"]),
        .library(name: "InputSync", targets: ["InputSync"]),
        .executable(name: "netplay-sync", targets: ["netplay-sync"]),
        .library(name: "NetplayKit", targets: ["NetplayKit"]),
        .executable(name: "netplay-peer", targets: ["netplay-peer"]),
        // The C API (include/netplay.h) for C and C++ frontends: libNetplayC.so.
        .library(name: "NetplayC", type: .dynamic, targets: ["NetplayC"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        // The macro plugin only (nothing of it is linked into the libraries); any release from 600 on.
        .package(url: "https://github.com/swiftlang/swift-syntax", "600.0.0" ..< "700.0.0"),
    ],
    targets: [
        // MARK: C libraries: libzmq, protoc-c output, libsodium, SQLite, the libretro API, process helpers
        // libzmq's headers live in /usr/include; linking is declared in the module map.
        // (pkg-config is not used: Debian's libzmq.pc adds -isystem flags SwiftPM rejects.)
        .systemLibrary(name: "CZeroMQ", providers: [.apt(["libzmq3-dev"])]),
        .target(
            name: "CNetplayProto",
            linkerSettings: [.linkedLibrary("protobuf-c")]
        ),
        .systemLibrary(name: "CSodium", providers: [.apt(["libsodium-dev"])]),
        .systemLibrary(name: "CSQLite", providers: [.apt(["libsqlite3-dev"])]),
        .target(name: "CLibretro"),
        .target(name: "CSupervisor"),
        // Linux's epoll, accept4 and pipe2 (Glibc's module map leaves them out): RetroArchRelay's server.
        .target(name: "CEpoll"),

        // MARK: The public memberwise initialiser Swift writes only inside a module: one macro for every
        // public value type (MemberwiseInit declares it; MemberwiseInitMacros is the compiler plugin).
        .macro(
            name: "MemberwiseInitMacros",
            dependencies: [
                .product(name: "SwiftSyntaxMacros", package: "swift-syntax"),
                .product(name: "SwiftCompilerPlugin", package: "swift-syntax"),
            ]
        ),
        .target(name: "MemberwiseInit", dependencies: ["MemberwiseInitMacros"]),

        // MARK: Foundation: the ZeroMQ binding, wire types, the service runtime (trust planes included), auth, the LAN beacon
        .target(name: "ZeroMQ", dependencies: ["CZeroMQ"]),
        // Binding IPv4 sockets and their addresses, one way for every listener and port probe.
        .target(name: "IPv4Sockets"),
        .target(name: "NetplayWire", dependencies: ["CNetplayProto", "MemberwiseInit"]),
        .target(
            name: "NetplayService",
            dependencies: [
                "CEpoll", "IPv4Sockets", "MemberwiseInit", "ZeroMQ", "NetplayWire",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .target(
            name: "NetplayAuth",
            dependencies: ["CSodium", "MemberwiseInit", "NetplayService", "NetplayWire",
                           .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        // The LAN beacon (port, size limit, codec, sender, listener) and its UDP sockets: one
        // implementation for LAN hosts and browsers (NetplayKit) and netplay-discovery.
        .target(name: "NetplayLAN", dependencies: ["IPv4Sockets", "MemberwiseInit", "NetplayWire"]),

        // MARK: The engine: rollback (pure Swift), sample games, the libretro core host
        .target(name: "Rollback", dependencies: ["MemberwiseInit"]),
        .target(name: "Games", dependencies: ["MemberwiseInit", "Rollback"]),
        .target(name: "Libretro", dependencies: ["CLibretro", "MemberwiseInit", "Rollback"], linkerSettings: [.linkedLibrary("dl")]),

        // MARK: Services: one library each, no service library depends on another
        .target(
            name: "Discovery",
            dependencies: ["MemberwiseInit", "NetplayAuth", "NetplayLAN", "NetplayService", "NetplayWire",
                           .product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "Coordinator",
            dependencies: ["CSQLite", "MemberwiseInit", "NetplayAuth", "NetplayService", "NetplayWire",
                           .product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "InputSync",
            dependencies: ["NetplayAuth", "NetplayService", "NetplayWire", "RetroArchRelay", "ZeroMQ", .product(name: "Logging", package: "swift-log")]
        ),
        // RetroArch's relay (tunnel) protocol: the pure core and its epoll server thread.
        .target(
            name: "RetroArchRelay",
            dependencies: ["CEpoll", "IPv4Sockets", "MemberwiseInit", "NetplayWire"]
        ),
        .target(
            name: "Telemetry",
            dependencies: ["IPv4Sockets", "MemberwiseInit", "NetplayService", "NetplayWire", "ZeroMQ",
                           .product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "Supervisor",
            dependencies: [
                "CSupervisor", "MemberwiseInit", "NetplayService", "NetplayWire", "ZeroMQ",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Yams", package: "Yams"),
            ]
        ),

        // MARK: The client SDK
        .target(
            name: "NetplayKit",
            dependencies: ["InputSync", "MemberwiseInit", "NetplayAuth", "NetplayLAN", "NetplayService", "NetplayWire", "Rollback",
                           "ZeroMQ", .product(name: "Logging", package: "swift-log")]
        ),

        // MARK: The C API: the public header (and the state hash, CLibretro's), implemented over NetplayKit
        .target(name: "CNetplayAPI", dependencies: ["CLibretro"]),
        .target(
            name: "NetplayC",
            dependencies: ["CNetplayAPI", "NetplayKit", "NetplayAuth", "NetplayService", "NetplayWire", "Rollback", "Libretro"]
        ),

        // MARK: Executables: thin argument parsing over the libraries
        .executableTarget(
            name: "netplay-discovery",
            dependencies: ["Discovery", "NetplayService", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        .executableTarget(
            name: "netplay-coordinator",
            dependencies: ["Coordinator", "NetplayService", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        .executableTarget(
            name: "netplay-sync",
            dependencies: ["InputSync", "NetplayAuth", "NetplayService", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        .executableTarget(
            name: "netplay-telemetry",
            dependencies: ["Telemetry", "NetplayService", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        .executableTarget(
            name: "netplay-supervisor",
            dependencies: ["Supervisor", "NetplayService", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        .executableTarget(
            name: "netplayctl",
            dependencies: [
                "NetplayService", "NetplayWire", "ZeroMQ", "Discovery",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // netplay-peer's commands (options, the game loop, host, join, spectate, replay, demo),
        // a library so its options are tested like the services'.
        .target(
            name: "PeerCommand",
            dependencies: ["NetplayKit", "InputSync", "NetplayAuth", "NetplayService", "NetplayWire", "Rollback", "Games", "Libretro",
                           .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        .executableTarget(name: "netplay-peer", dependencies: ["PeerCommand", "NetplayService"]),

        // MARK: Benchmarks (make bench)
        .executableTarget(
            name: "netplay-bench",
            dependencies: [
                "ZeroMQ", "NetplayWire", "Rollback", "Games", "Libretro", "SystemTools", "Discovery", "Coordinator", "NetplayService",
                "NetplayAuth", "InputSync", "WANHarness",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Benchmarks/netplay-bench"
        ),

        // MARK: The real-path WAN harness: a TUN-joining delay forwarder (C) and the lab that drives it
        // (network namespaces, TUN devices, iptables loss) for tests and benchmarks.
        .executableTarget(name: "netplay-wanlink", path: "Sources/netplay-wanlink"),
        .target(name: "WANHarness", dependencies: ["IPv4Sockets", "SystemTools", "NetplayService", "NetplayAuth"]),
        // Short system commands and the cc65 build of the test ROM (tests, benchmarks, the WAN harness).
        .target(name: "SystemTools"),

        // MARK: Test support: real processes, clusters, keys; a sample service for the runtime's tests
        .target(
            name: "NetplayTestSupport",
            dependencies: ["NetplayService", "NetplayWire", "ZeroMQ", "WANHarness", "Libretro", "Rollback", "SystemTools",
                           .product(name: "ArgumentParser", package: "swift-argument-parser")],
            path: "Tests/Support"
        ),
        .executableTarget(
            name: "netplay-sample-service",
            dependencies: [
                "NetplayService", "NetplayWire",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Tests/Fixtures/SampleService"
        ),

        // MARK: Unit, property and fuzz tests (plus each library's own process tests)
        .testTarget(
            name: "MemberwiseInitTests",
            dependencies: ["MemberwiseInit", "MemberwiseInitMacros", "NetplayTestSupport",
                           .product(name: "SwiftSyntaxMacroExpansion", package: "swift-syntax"),
                           .product(name: "SwiftSyntaxMacrosGenericTestSupport", package: "swift-syntax")]
        ),
        .testTarget(name: "ZeroMQTests", dependencies: ["NetplayTestSupport", "ZeroMQ"]),
        .testTarget(name: "NetplayWireTests", dependencies: ["NetplayTestSupport", "NetplayWire", "CNetplayProto", "Rollback"]),
        .testTarget(
            name: "NetplayServiceTests",
            dependencies: ["NetplayService", "NetplayWire", "ZeroMQ", "NetplayTestSupport", "netplay-sample-service"]
        ),
        .testTarget(name: "NetplayAuthTests", dependencies: ["NetplayTestSupport", "NetplayAuth", "NetplayWire"]),
        .testTarget(name: "RollbackTests", dependencies: ["NetplayTestSupport", "Rollback", "Games"]),
        .testTarget(name: "GamesTests", dependencies: ["NetplayTestSupport", "Games", "Rollback"]),
        .testTarget(name: "PeerCommandTests", dependencies: ["NetplayTestSupport", "PeerCommand", "NetplayLAN", "NetplayKit", "NetplayWire", "netplay-peer",
                                                  .product(name: "ArgumentParser", package: "swift-argument-parser")]),
        .testTarget(name: "IPv4SocketsTests", dependencies: ["IPv4Sockets", "NetplayTestSupport"]),
        .testTarget(name: "WANHarnessTests", dependencies: ["NetplayTestSupport", "WANHarness", "SystemTools", "netplay-wanlink"]),
        .testTarget(
            name: "WANPlayTests",
            dependencies: ["NetplayTestSupport", "WANHarness", "NetplayService", "NetplayWire", "netplay-wanlink", "netplay-peer", "netplay-sync",
                           "netplay-coordinator", "netplay-discovery"]
        ),
        .testTarget(name: "LibretroTests", dependencies: ["Libretro", "SystemTools", "Rollback", "NetplayTestSupport"]),
        .testTarget(
            name: "DiscoveryTests",
            dependencies: ["Discovery", "NetplayLAN", "NetplayService", "NetplayWire", "NetplayTestSupport", "Rollback", "netplay-discovery",
                           .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        .testTarget(
            name: "CoordinatorTests",
            dependencies: ["Coordinator", "NetplayAuth", "NetplayService", "NetplayWire", "NetplayTestSupport"]
        ),
        .testTarget(
            name: "InputSyncTests",
            dependencies: ["InputSync", "RetroArchRelay", "NetplayAuth", "NetplayService", "NetplayWire", "ZeroMQ", "NetplayTestSupport", "netplay-sync"]
        ),
        .testTarget(
            name: "RetroArchRelayTests",
            dependencies: ["RetroArchRelay", "Rollback", "InputSync", "NetplayService", "NetplayWire", "ZeroMQ", "NetplayTestSupport", "netplay-sync"]
        ),
        .testTarget(
            name: "TelemetryTests",
            dependencies: ["Telemetry", "Rollback", "NetplayService", "NetplayWire", "ZeroMQ", "NetplayTestSupport", "netplay-telemetry"]
        ),
        .testTarget(
            name: "SupervisorTests",
            dependencies: ["Supervisor", "NetplayService", "NetplayWire", "NetplayTestSupport", "netplay-supervisor",
                           "netplay-sample-service"]
        ),
        .testTarget(
            name: "NetplayKitTests",
            dependencies: ["NetplayKit", "NetplayAuth", "NetplayLAN", "InputSync", "NetplayService", "NetplayWire", "Rollback", "Games", "NetplayTestSupport"]
        ),

        // MARK: End to end: real clusters, real players, real RetroArch and emulator cores; the threat model
        .testTarget(
            name: "ControlPlaneE2ETests",
            dependencies: ["NetplayAuth", "NetplayService", "NetplayWire", "NetplayTestSupport", "netplay-discovery",
                           "netplay-coordinator", "netplayctl"]
        ),
        .testTarget(
            name: "PlayE2ETests",
            dependencies: ["InputSync", "NetplayAuth", "NetplayService", "NetplayWire", "NetplayTestSupport",
                           "netplay-sync", "netplay-peer", "netplay-discovery", "netplay-coordinator",
                           "netplay-bench"]
        ),
        .testTarget(
            name: "LibretroE2ETests",
            dependencies: ["Libretro", "SystemTools", "NetplayService", "NetplayWire", "NetplayTestSupport",
                           "netplay-sync", "netplay-peer", "netplay-discovery", "netplay-coordinator"]
        ),
        // A C frontend (compiled by the test against libNetplayC) hosts nestopia; netplay-peer joins.
        .testTarget(
            name: "CAPITests",
            dependencies: ["CNetplayAPI", "NetplayC", "NetplayKit", "NetplayWire", "Rollback", "Libretro", "SystemTools", "NetplayTestSupport", "netplay-sync",
                           "netplay-peer", "netplay-discovery", "netplay-coordinator"],
            exclude: ["c"]
        ),
        .testTarget(
            name: "ClusterE2ETests",
            dependencies: ["NetplayService", "NetplayWire", "NetplayTestSupport", "netplay-supervisor", "netplay-telemetry",
                           "netplay-sample-service", "netplay-discovery", "netplay-coordinator", "netplay-sync", "netplay-peer"]
        ),
        .testTarget(
            name: "SecurityTests",
            dependencies: ["NetplayService", "NetplayWire", "ZeroMQ", "NetplayTestSupport", "netplay-supervisor", "netplay-telemetry",
                           "netplay-discovery", "netplay-coordinator", "netplay-sync", "netplayctl", "netplay-peer"]
        ),
    ]
)
