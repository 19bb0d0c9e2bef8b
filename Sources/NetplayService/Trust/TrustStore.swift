import Foundation
import MemberwiseInit
import Synchronization
import ZeroMQ

/// The cluster's trust store: a directory with the public key of every cluster member and every
/// operator. Control endpoints admit exactly these keys (through ``ZAPAuthenticator``), and a
/// client finds here the key of the service it calls. Layout (docs/security.md):
///
///     keys/cluster/<instance>.pub    kind, instance, key, endpoint, control, events (key=value lines)
///     keys/operators/<name>.pub      name, key
///     keys/operator.secret           the local operator's secret key (mode 0600), for netplayctl
///
/// The directory is created with mode 0700: whoever can write in it is trusted. A service
/// publishes its own member file at start; an orchestrator may instead mount a read-only store
/// it generated (`netplayctl keygen --trust-store`). Files are re-read when they change.
public final class TrustStore: Sendable {
    /// A cluster member: a service instance and its control endpoints.
    @PublicMemberwiseInit
    public struct Member: Sendable, Equatable {
        /// Service kind ("coordinator", "sync", ...).
        public var kind: String
        /// Instance name, unique in the cluster.
        public var instance: String
        /// CurveZMQ public key (32 bytes): its identity as a client and its key as a server.
        public var publicKey: [UInt8]
        /// Its public requests endpoint, if it has one.
        public var endpoint: String? = nil
        /// Its control endpoint (cluster and operator planes).
        public var control: String? = nil
        /// Its events endpoint, if any.
        public var events: String? = nil
    }

    /// An operator: someone allowed to run netplayctl's operator verbs.
    @PublicMemberwiseInit
    public struct Operator: Sendable, Equatable {
        /// The operator's name (appears in logs).
        public var name: String
        /// CurveZMQ public key (32 bytes).
        public var publicKey: [UInt8]
    }

    private struct Snapshot: Sendable {
        var stamp: [Double] = []
        var members: [Member] = []
        var operators: [Operator] = []
    }

    /// The store's directory.
    public let directory: URL
    private let cache = Mutex(Snapshot())

    /// A store at `directory` (nothing is read or created until used).
    public init(directory: URL) {
        self.directory = directory.standardizedFileURL
    }

    /// The default store of a service whose data directory is `dataDirectory`: `keys/` beside it
    /// (under `make up`, `data/keys`).
    public static func defaultDirectory(forDataDirectory dataDirectory: URL) -> URL {
        dataDirectory.standardizedFileURL.deletingLastPathComponent().appendingPathComponent("keys")
    }

    private var clusterDirectory: URL { directory.appendingPathComponent("cluster") }
    private var operatorsDirectory: URL { directory.appendingPathComponent("operators") }
    /// Where the local operator's secret key lives.
    public var operatorSecretURL: URL { directory.appendingPathComponent("operator.secret") }

    // MARK: Reading

    /// Every cluster member, read afresh when a file changed.
    public var members: [Member] { snapshot().members }
    /// Every operator.
    public var operators: [Operator] { snapshot().operators }

    /// The member named `instance`.
    public func member(instance: String) -> Member? {
        lookup { $0.members.first { $0.instance == instance } }
    }

    /// The members of service kind `kind`, the most recently published first.
    public func members(kind: String) -> [Member] { members.filter { $0.kind == kind } }

    /// The member whose control, public or events endpoint is `endpoint`.
    public func member(endpoint: String) -> Member? {
        lookup { $0.members.first { $0.control == endpoint || $0.endpoint == endpoint || $0.events == endpoint } }
    }

    /// The public key of the server at `endpoint` (a member's control, public or events
    /// endpoint), else of the only member of `kind`; nil when neither is known.
    public func serverKey(for endpoint: String, kind: String?) -> [UInt8]? {
        if let member = member(endpoint: endpoint) { return member.publicKey }
        guard let kind else { return nil }
        let ofKind = members(kind: kind)
        return ofKind.count == 1 ? ofKind[0].publicKey : nil
    }

    /// Who holds `publicKey`: a cluster member, an operator, or nil when the store does not know it.
    public func caller(forPublicKey publicKey: [UInt8]) -> Caller? {
        lookup { snapshot in
            if let member = snapshot.members.first(where: { $0.publicKey == publicKey }) {
                return .cluster(kind: member.kind, instance: member.instance)
            }
            if let person = snapshot.operators.first(where: { $0.publicKey == publicKey }) {
                return .operator(name: person.name)
            }
            return nil
        }
    }

    /// `find` over the files as they are now (read again only when one changed).
    private func lookup<Found>(_ find: (Snapshot) -> Found?) -> Found? {
        find(snapshot())
    }

    private func snapshot() -> Snapshot {
        let stamp = [clusterDirectory, operatorsDirectory].flatMap(Self.entriesStamp)
        if let cached = cache.withLock({ $0.stamp == stamp ? $0 : nil }) { return cached }
        var fresh = Snapshot(stamp: stamp)
        fresh.members = Self.records(in: clusterDirectory).compactMap(Self.member(from:))
        fresh.operators = Self.records(in: operatorsDirectory).compactMap(Self.operatorRecord(from:))
        cache.withLock { $0 = fresh }
        return fresh
    }

    /// What identifies the directory's files as they are: name, inode, size and modification
    /// time of each (a directory's own mtime can miss two writes within one clock tick; a file
    /// replaced by rename gets a new inode).
    private static func entriesStamp(_ directory: URL) -> [Double] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return [-1] }
        var stamp: [Double] = []
        for name in names.sorted() where name.hasSuffix(".pub") {
            var info = stat()
            guard stat(directory.appendingPathComponent(name).path, &info) == 0 else { continue }
            stamp += [Double(name.hashValue), Double(info.st_ino), Double(info.st_size),
                      Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9]
        }
        return stamp
    }

    /// The records of the directory's files, the most recently written first: where two members
    /// claim the same endpoint (one left over from an earlier run under another name), lookups
    /// by endpoint find the one that published last, which is the one bound there now.
    private static func records(in directory: URL) -> [[String: String]] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return [] }
        func written(_ name: String) -> Double {
            var info = stat()
            guard stat(directory.appendingPathComponent(name).path, &info) == 0 else { return 0 }
            return Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
        }
        let stamped: [(name: String, written: Double)] = names.filter { $0.hasSuffix(".pub") }.map { ($0, written($0)) }
        let ordered: [String] = stamped.sorted { a, b in
            a.written != b.written ? a.written > b.written : a.name < b.name
        }.map { $0.name }
        return ordered.compactMap { (name: String) -> [String: String]? in
            guard let text = try? String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8),
                  text.utf8.count < 4096 else { return nil }
            var fields: [String: String] = [:]
            for line in text.split(whereSeparator: \.isNewline) {
                guard let equals = line.firstIndex(of: "="), !line.hasPrefix("#") else { continue }
                fields[line[..<equals].trimmingCharacters(in: .whitespaces)] =
                    line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            }
            return fields
        }
    }

    private static func key(_ fields: [String: String]) -> [UInt8]? {
        guard let text = fields["key"], let key = Z85.decode(text), key.count == 32 else { return nil }
        return key
    }

    private static func member(from fields: [String: String]) -> Member? {
        guard let kind = fields["kind"], let instance = fields["instance"], let key = key(fields),
              Self.isName(kind), Self.isName(instance) else { return nil }
        func endpoint(_ name: String) -> String? { fields[name].flatMap { $0.isEmpty ? nil : $0 } }
        return Member(kind: kind, instance: instance, publicKey: key, endpoint: endpoint("endpoint"),
                      control: endpoint("control"), events: endpoint("events"))
    }

    private static func operatorRecord(from fields: [String: String]) -> Operator? {
        guard let name = fields["name"], let key = key(fields), Self.isName(name) else { return nil }
        return Operator(name: name, publicKey: key)
    }

    /// True for 1 to 64 ASCII letters, digits, '-', '_' or '.': the rule for instance and
    /// operator names wherever they are given (flags, cluster files, key records), so a name a
    /// service starts with is one its trust-store record keeps.
    public static func isName(_ text: String) -> Bool {
        (1...64).contains(text.utf8.count) && text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) }
    }

    // MARK: Writing

    /// Writes (or replaces) `member`'s file. Throws when the store is not writable.
    public func publish(_ member: Member) throws {
        var lines = ["kind=\(member.kind)", "instance=\(member.instance)", "key=\(Z85.encode(member.publicKey) ?? "")"]
        if let endpoint = member.endpoint { lines.append("endpoint=\(endpoint)") }
        if let control = member.control { lines.append("control=\(control)") }
        if let events = member.events { lines.append("events=\(events)") }
        try write(lines, to: clusterDirectory.appendingPathComponent("\(member.instance).pub"), mode: 0o644)
    }

    /// Writes (or replaces) an operator's file.
    public func publish(_ person: Operator) throws {
        try write(["name=\(person.name)", "key=\(Z85.encode(person.publicKey) ?? "")"],
                  to: operatorsDirectory.appendingPathComponent("\(person.name).pub"), mode: 0o644)
    }

    /// The local operator's key pair (`operator.secret`), created and published as operator
    /// `name` when `create` is true and there is none. Nil when absent and not created.
    public func localOperator(create: Bool, name: String = "operator") throws -> CurveKeyPair? {
        if let pair = try KeyFile.read(operatorSecretURL) {
            // Also when another process created the key a moment ago and has not published it yet.
            if !operators.contains(where: { $0.publicKey == pair.publicKey }) {
                try publish(Operator(name: name, publicKey: pair.publicKey))
            }
            return pair
        }
        guard create else { return nil }
        let pair = try KeyFile.create(operatorSecretURL)  // the first of several racing creators wins
        try publish(Operator(name: name, publicKey: pair.publicKey))
        return pair
    }

    private func write(_ lines: [String], to url: URL, mode: Int) throws {
        try Self.makePrivateDirectory(directory)
        try Self.makePrivateDirectory(url.deletingLastPathComponent())
        try KeyFile.atomicWrite(Data((lines.joined(separator: "\n") + "\n").utf8), to: url, mode: mode)
    }

    /// Creates `url` (and parents) with mode 0700 when missing.
    static func makePrivateDirectory(_ url: URL) throws {
        if !FileManager.default.fileExists(atPath: url.path) {
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        }
    }
}

/// A CurveZMQ secret key kept in a file of its own (Z85 text, mode 0600): a service's identity in
/// its data directory, the operator's key in the trust store.
public enum KeyFile {
    /// The key pair in `url`, or nil when there is no such file. Throws for a malformed file or
    /// one that others can read.
    public static func read(_ url: URL) throws -> CurveKeyPair? {
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        try requirePrivate(url.path)
        let text = try String(contentsOf: url, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        do { return try CurveKeyPair(secretZ85: text) } catch {
            throw RuntimeStartError("key file \(url.path) does not hold a 40-character Z85 secret key")
        }
    }

    /// Generates a key pair and writes its secret to `url` with mode 0600 (never readable by
    /// others, not even for an instant). When another process creates the same file at the same
    /// time, the first one's key is kept and returned to both.
    public static func create(_ url: URL) throws -> CurveKeyPair {
        let pair = try CurveKeyPair.generate()
        try TrustStore.makePrivateDirectory(url.deletingLastPathComponent())
        try atomicWrite(Data((pair.secretZ85 + "\n").utf8), to: url, mode: 0o600, replacing: false)
        return try read(url) ?? pair
    }

    /// Refuses a secret file that anyone but its owner may read or write: the one rule for every
    /// key a service keeps for itself (its identity, the operator's key, the coordinator's token
    /// key). A looser mode is not tightened in place: the secret may have been read already, and
    /// only the operator can judge that and replace it.
    public static func requirePrivate(_ path: String) throws {
        var info = stat()
        guard stat(path, &info) == 0, info.st_mode & 0o077 != 0 else { return }
        throw RuntimeStartError("key file \(path) is open to others (mode \(String(info.st_mode & 0o777, radix: 8))); chmod 600 it")
    }

    /// The key pair in `url`, created when missing.
    public static func loadOrCreate(_ url: URL) throws -> CurveKeyPair {
        try read(url) ?? create(url)
    }

    /// Writes `data` to a temporary file created with `mode` (so it is never readable by others,
    /// not even for an instant), syncs it, then renames it over `url` (or, when not `replacing`,
    /// links it there unless `url` exists already: the first of several racing writers wins).
    /// Every private file the services write goes through here: keys, the trust store's lists, the
    /// coordinator's token key and generated cluster secret.
    public static func atomicWrite(_ data: Data, to url: URL, mode: Int, replacing: Bool = true) throws {
        let temporary = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).\(getpid()).\(UInt32.random(in: 0 ... .max)).tmp")
        let fd = open(temporary.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode_t(mode))
        guard fd >= 0 else { throw RuntimeStartError("cannot write \(temporary.path): \(String(cString: strerror(errno)))") }
        _ = fchmod(fd, mode_t(mode))
        let written = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        close(fd)
        guard written == data.count, synced else {
            unlink(temporary.path)
            throw RuntimeStartError("cannot write \(url.path): \(String(cString: strerror(errno)))")
        }
        if replacing {
            guard rename(temporary.path, url.path) == 0 else {
                unlink(temporary.path)
                throw RuntimeStartError("cannot write \(url.path): \(String(cString: strerror(errno)))")
            }
        } else {
            let linked = link(temporary.path, url.path) == 0 || errno == EEXIST
            unlink(temporary.path)
            guard linked else { throw RuntimeStartError("cannot write \(url.path): \(String(cString: strerror(errno)))") }
        }
    }
}
