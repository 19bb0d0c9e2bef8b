import Dispatch
import Foundation
import NetplayTestSupport
import Synchronization
import Testing
import ZeroMQ
@testable import NetplayService

@Suite("Trust store and planes", .ownThread)
struct TrustStoreTests {
    func store() -> TrustStore {
        TrustStore(directory: FileManager.default.temporaryDirectory.appendingPathComponent("netplay-trust-\(UUID().uuidString)"))
    }

    @Test func aKeyPublishedNowIsKnownAtOnceEvenWithinOneClockTick() throws {
        let trust = store()
        for index in 0..<50 {
            let keys = try CurveKeyPair.generate()
            _ = trust.members  // cached before the write
            try trust.publish(TrustStore.Member(kind: "sync", instance: "sync-\(index)", publicKey: keys.publicKey))
            #expect(trust.caller(forPublicKey: keys.publicKey) == .cluster(kind: "sync", instance: "sync-\(index)"))
        }
        #expect(trust.caller(forPublicKey: try CurveKeyPair.generate().publicKey) == nil)
    }

    @Test func theLastToPublishAnEndpointIsTheOneFoundThere() throws {
        let trust = store()
        let stale = try CurveKeyPair.generate(), fresh = try CurveKeyPair.generate()
        try trust.publish(TrustStore.Member(kind: "discovery", instance: "discovery-111", publicKey: stale.publicKey,
                                            endpoint: "tcp://127.0.0.1:7100", control: "tcp://127.0.0.1:7105"))
        Thread.sleep(forTimeInterval: 0.02)
        try trust.publish(TrustStore.Member(kind: "discovery", instance: "discovery", publicKey: fresh.publicKey,
                                            endpoint: "tcp://127.0.0.1:7100", control: "tcp://127.0.0.1:7105"))
        #expect(trust.member(endpoint: "tcp://127.0.0.1:7100")?.publicKey == fresh.publicKey)
        #expect(trust.serverKey(for: "tcp://127.0.0.1:7105", kind: "discovery") == fresh.publicKey)
    }

    @Test func racingCreatorsOfTheOperatorKeyAllGetTheOneThatWasPublished() throws {
        let trust = store()
        let keys = Mutex<[[UInt8]]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            if let pair = try? trust.localOperator(create: true) { keys.withLock { $0.append(pair.secretKey) } }
        }
        let secrets = keys.withLock { $0 }
        #expect(secrets.count == 8 && Set(secrets).count == 1, "\(Set(secrets).count) different operator keys")
        let onFile = try #require(try trust.localOperator(create: false))
        #expect(trust.operators.map(\.publicKey) == [onFile.publicKey])
        #expect(trust.caller(forPublicKey: onFile.publicKey) == .operator(name: "operator"))
    }

    @Test func secretsAreTheOwnersAloneAndMalformedOnesAreRefused() throws {
        let trust = store()
        _ = try trust.localOperator(create: true)
        let mode = (try FileManager.default.attributesOfItem(atPath: trust.operatorSecretURL.path)[.posixPermissions] as? NSNumber)?.intValue
        #expect(mode == 0o600)
        chmod(trust.operatorSecretURL.path, 0o644)
        #expect(throws: RuntimeStartError.self) { try trust.localOperator(create: false) }
        let bad = trust.directory.appendingPathComponent("bad.secret")
        try "not a key".write(to: bad, atomically: true, encoding: .utf8)
        chmod(bad.path, 0o600)
        #expect(throws: RuntimeStartError.self) { try KeyFile.read(bad) }
    }

    @Test func userIdsRoundTripAndAnythingElseIsAnonymous() {
        for caller in [Caller.cluster(kind: "sync", instance: "sync-3"), .operator(name: "ops")] {
            #expect(ZAPAuthenticator.caller(fromUserId: ZAPAuthenticator.userId(for: caller)) == caller)
        }
        for junk in [nil, "", "cluster:", "cluster:nokind", "root", "operator"] as [String?] {
            #expect(ZAPAuthenticator.caller(fromUserId: junk) == .anonymous, "\(String(describing: junk))")
        }
    }

    @Test func aFloodOfRefusalsLogsOncePerIntervalAndCountsTheRest() {
        let budget = WarningBudget(perSeconds: 1)
        #expect(budget.take(now: 1_000_000_000) == (true, 0))
        for step in 1...99 { #expect(!budget.take(now: 1_000_000_000 + UInt64(step) * 5_000_000).allowed) }
        #expect(budget.take(now: 2_000_000_001) == (true, 99))
        #expect(budget.take(now: 3_500_000_000) == (true, 0))
    }

    @Test func everyBodyHasAPlaneAndStrangersGetOnlyThePublicOne() {
        #expect(RequestPlane.of(.closeRelaySessionRequest(.init())) == .cluster)
        #expect(RequestPlane.of(.registerRelayRequest(.init())) == .cluster)
        #expect(RequestPlane.of(.introspectRequest(.init())) == .inspect)
        #expect(RequestPlane.of(.stopClusterRequest(.init())) == .operator)
        #expect(RequestPlane.of(.joinSessionRequest(.init())) == .public)
        let member = Caller.cluster(kind: "sync", instance: "sync-0"), person = Caller.operator(name: "ops")
        for plane in RequestPlane.allCases {
            #expect(plane.admits(.anonymous) == (plane == .public))
            #expect(plane.admits(member) == (plane != .operator))
            #expect(plane.admits(person) == (plane != .cluster))
        }
    }
}
