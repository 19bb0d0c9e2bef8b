import CNetplayAPI
import Foundation
import Libretro
import NetplayKit
import NetplayService

// np_client: configuration, creation, freeing; the version and the helpers a frontend needs
// to agree with other peers (content digests, a libretro core's id).

/// What an np_client handle stands for: a NetplayKit client (thread-safe).
final class ClientHandle: Sendable {
    let client: NetplayClient

    init(_ client: NetplayClient) { self.client = client }

    /// The client behind `handle`.
    static func from(_ handle: OpaquePointer?) throws(CAPIFailure) -> ClientHandle {
        guard let client = HandleRegistry.lookup(handle, as: ClientHandle.self) else {
            throw CAPIFailure(NP_ERR_INVALID_HANDLE, handle == nil ? "the np_client is NULL" : "not a live np_client (freed?)")
        }
        return client
    }
}

/// The size of version 1 of a struct the caller fills (later versions append fields).
/// The sizes a versioned struct the caller passes in has had, oldest first (`struct_size`):
/// frozen per release, so a later library still takes what an older header filled. The first
/// release's: `np_client_config` 64 bytes, `np_host_settings` 104 (checked by the C API tests
/// against the header's `sizeof`).
enum StructVersions {
    static let clientConfig = [64]
    static let hostSettings = [104]
}

/// The caller's versioned struct at `pointer`, read safely: its `struct_size` (the first field)
/// first, alone; a size that no version of the header has (a struct never filled by its
/// `_init`, garbage) is refused; then only the bytes the caller's version has are copied, over
/// `defaults` (copying the library's whole struct from an older, shorter one read past it).
func readVersioned<T>(_ pointer: UnsafePointer<T>, _ type: String, sizes: [Int], defaults: T) throws(CAPIFailure) -> T {
    let size = Int(UnsafeRawPointer(pointer).loadUnaligned(as: UInt32.self))
    guard sizes.contains(size) else {
        throw .invalid("\(type).struct_size is \(size), which is no size this struct has had (\(sizes.map(String.init).joined(separator: ", "))): fill it with \(type)_init first")
    }
    var value = defaults
    withUnsafeMutableBytes(of: &value) { target in
        target.baseAddress!.copyMemory(from: UnsafeRawPointer(pointer), byteCount: min(size, MemoryLayout<T>.size))
    }
    return value
}

/// Writes `defaults` into the caller's struct of `size` bytes (its header's `sizeof`): as much
/// as both versions have, with `struct_size` the smaller of the two; nothing when `size` is
/// smaller than the first version (not this struct). Writing the library's whole struct
/// overran a frontend built against an older, shorter header.
func writeVersioned<T>(_ defaults: T, to pointer: UnsafeMutablePointer<T>?, size: Int, sizes: [Int]) {
    guard let pointer, let oldest = sizes.first, size >= oldest else { return }
    var value = defaults
    let count = min(size, MemoryLayout<T>.size)
    withUnsafeMutableBytes(of: &value) { source in
        source.storeBytes(of: UInt32(count), as: UInt32.self)
        UnsafeMutableRawPointer(pointer).copyMemory(from: source.baseAddress!, byteCount: count)
    }
}

/// The toolkit's version as a C string, made once (never freed).
nonisolated(unsafe) private let versionString: UnsafeMutablePointer<CChar> = strdup(NetplayVersion.current)!

@_cdecl("np_api_version")
public func np_api_version() -> UInt32 { UInt32(NP_API_VERSION) }

@_cdecl("np_version_string")
public func np_version_string() -> UnsafePointer<CChar> { UnsafePointer(versionString) }

@_cdecl("np_content_digest")
public func np_content_digest(_ data: UnsafeRawPointer?, _ size: Int, _ crc32: UnsafeMutablePointer<UInt32>?,
                              _ md5: UnsafeMutablePointer<UInt8>?) -> np_result {
    entry {
        // size_t arrives as Int: past Int.max it is negative, and the buffer below trapped.
        guard size >= 0 else { throw CAPIFailure.invalid("size \(UInt(bitPattern: size)) is larger than any content") }
        guard data != nil || size == 0 else { throw CAPIFailure.invalid("data is NULL with a size of \(size)") }
        // Read where they lie: a copy cost a disc image's size again (and the digest's padding,
        // as it was, twice that).
        let bytes = UnsafeRawBufferPointer(start: size == 0 ? nil : data, count: size)
        crc32?.pointee = ContentDigest.crc32(bytes)
        if let md5 { md5.update(from: ContentDigest.md5(bytes), count: 16) }
    }
}

@_cdecl("np_libretro_core_id")
public func np_libretro_core_id(_ libraryName: UnsafePointer<CChar>?, _ out: UnsafeMutablePointer<CChar>?, _ capacity: Int) -> np_result {
    entry {
        guard let name = string(libraryName), !name.isEmpty else { throw CAPIFailure.invalid("library_name is NULL or empty") }
        guard let out else { throw CAPIFailure.invalid("out is NULL") }
        try copyCString(LoadedCore.coreId(libraryName: name), to: out, capacity: capacity)
    }
}

/// The defaults `np_client_config_init` fills in.
func clientConfigDefaults() -> np_client_config {
    np_client_config(struct_size: UInt32(MemoryLayout<np_client_config>.size), name: nil, discovery: nil,
                     coordinator: nil, lan_port: LanBeacon.defaultPort, timeout_seconds: 2, server_key: nil, measure_relays: 1)
}

@_cdecl("np_client_config_init_sized")
public func np_client_config_init_sized(_ config: UnsafeMutablePointer<np_client_config>?, _ size: Int) {
    writeVersioned(clientConfigDefaults(), to: config, size: size, sizes: StructVersions.clientConfig)
}

@_cdecl("np_client_create")
public func np_client_create(_ config: UnsafePointer<np_client_config>?, _ out: UnsafeMutablePointer<OpaquePointer?>?) -> np_result {
    entry {
        guard let given = config, let out else { throw CAPIFailure.invalid("config and out must not be NULL") }
        let config = try readVersioned(given, "np_client_config", sizes: StructVersions.clientConfig, defaults: clientConfigDefaults())
        guard let name = string(config.name), !name.isEmpty, name.utf8.count <= 64 else {
            throw CAPIFailure.invalid("config.name must be 1 to 64 bytes")
        }
        guard config.timeout_seconds > 0, config.timeout_seconds <= 60 else {
            throw CAPIFailure.invalid("config.timeout_seconds must be in (0, 60], got \(config.timeout_seconds)")
        }
        func endpoint(_ value: UnsafePointer<CChar>?, default fallback: String) -> String? {
            guard let text = string(value) else { return fallback }
            return text.isEmpty ? nil : text
        }
        var lobby = NetplayLobby(discovery: endpoint(config.discovery, default: ServiceDefaults.discoveryEndpoint),
                                 coordinator: endpoint(config.coordinator, default: ServiceDefaults.coordinatorEndpoint),
                                 lanBeaconPort: config.lan_port, timeout: config.timeout_seconds,
                                 serverKey: config.server_key.map { [UInt8](UnsafeBufferPointer(start: $0, count: 32)) })
        lobby.measuresRelays = config.measure_relays != 0
        out.pointee = HandleRegistry.register(ClientHandle(NetplayClient(name: name, lobby: lobby)))
    }
}

@_cdecl("np_client_free")
public func np_client_free(_ client: OpaquePointer?) {
    _ = HandleRegistry.remove(client, as: ClientHandle.self)
}
