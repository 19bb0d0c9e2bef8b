import Foundation
import NetplayAuth
import NetplayTestSupport
import NetplayWire
import Testing

@Suite("Progress proofs", .ownThread)
struct ProgressProofTests {
    let ring = TicketKeyRing.generate()

    @Test func aProofChecksForItsSessionAndFrameOnly() throws {
        let proofs = ProgressProofs(keyRing: ring)
        let proof = proofs.proof(sessionId: "s-1", confirmedFrames: 1_234)
        #expect(proof.macs.count == 1 && proof.macs[0].mac.count == 32 && proof.macs[0].keyId == ring.signingKeyId)
        #expect(proofs.check(proof, sessionId: "s-1") == .success(1_234))
        #expect(proofs.check(proof, sessionId: "s-2") == .failure(.badSignature))
        var moved = proof
        moved.confirmedFrames += 1
        #expect(proofs.check(moved, sessionId: "s-1") == .failure(.badSignature))
        var empty = proof
        empty.macs[0].mac = []
        #expect(proofs.check(empty, sessionId: "s-1") == .failure(.badSignature))
        #expect(proofs.check(ProgressProof(confirmedFrames: 1_234), sessionId: "s-1") == .failure(.unknownKey([])))
        // Survives the wire.
        #expect(try ProgressProof(decoding: proof.encoded()) == proof)
    }

    /// The bytes every relay version must sign alike (computed apart, with Python's hmac).
    @Test func theSignatureIsTheDocumentedHMAC() throws {
        let ring = try TicketKeyRing(keys: [1: Array(0 ..< 32)])
        let proof = ProgressProofs(keyRing: ring).proof(sessionId: "s-1", confirmedFrames: 1_234)
        #expect(proof.macs.first?.mac.map { String(format: "%02x", $0) }.joined()
            == "1b60bdd6a4fabe016c11df40898a1a2699309bb68faf86d51b07f73909eb5de8")
    }

    /// Signed under every key, a proof checks on a relay not yet given a new key and on one
    /// whose ring no longer holds a key retired while the match ran.
    @Test func aProofChecksAcrossAKeyRotation() throws {
        let old = try TicketKeyRing(keys: [1: Array(repeating: 7, count: 32)])
        let both = try TicketKeyRing(keys: [1: Array(repeating: 7, count: 32), 2: Array(repeating: 9, count: 32)])
        let new = try TicketKeyRing(keys: [2: Array(repeating: 9, count: 32)])
        let byUpdated = ProgressProofs(keyRing: both).proof(sessionId: "s", confirmedFrames: 60)
        #expect(byUpdated.macs.map(\.keyId) == [2, 1])
        #expect(ProgressProofs(keyRing: old).check(byUpdated, sessionId: "s") == .success(60), "not given the new key yet")
        #expect(ProgressProofs(keyRing: new).check(byUpdated, sessionId: "s") == .success(60), "the old key retired")
        let byOld = ProgressProofs(keyRing: old).proof(sessionId: "s", confirmedFrames: 60)
        #expect(ProgressProofs(keyRing: both).check(byOld, sessionId: "s") == .success(60))
        #expect(ProgressProofs(keyRing: new).check(byOld, sessionId: "s") == .failure(.unknownKey([1])))
        // A forged MAC beside a genuine one under another key still checks by the genuine one;
        // a forged one alone does not.
        var mixed = byUpdated
        mixed.macs[0].mac = Array(repeating: 0, count: 32)
        #expect(ProgressProofs(keyRing: both).check(mixed, sessionId: "s") == .success(60))
        #expect(ProgressProofs(keyRing: new).check(mixed, sessionId: "s") == .failure(.badSignature))
        // A ring of more keys than the wire carries signs under its newest eight.
        let many = try TicketKeyRing(keys: Dictionary(uniqueKeysWithValues: (1 ... 10).map { (UInt32($0), Array(repeating: UInt8($0), count: 32)) }))
        let wide = ProgressProofs(keyRing: many).proof(sessionId: "s", confirmedFrames: 1)
        #expect(wide.macs.map(\.keyId) == Array((3 ... 10).reversed()))
        #expect(try ProgressProof(decoding: wide.encoded()) == wide)
    }
}
