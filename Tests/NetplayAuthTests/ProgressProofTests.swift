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
        #expect(proof.mac.count == 32 && proof.keyId == ring.signingKeyId)
        #expect(proofs.check(proof, sessionId: "s-1") == .success(1_234))
        #expect(proofs.check(proof, sessionId: "s-2") == .failure(.badSignature))
        var moved = proof
        moved.confirmedFrames += 1
        #expect(proofs.check(moved, sessionId: "s-1") == .failure(.badSignature))
        var empty = proof
        empty.mac = []
        #expect(proofs.check(empty, sessionId: "s-1") == .failure(.badSignature))
        // Survives the wire.
        #expect(try ProgressProof(decoding: proof.encoded()) == proof)
    }

    /// The bytes every relay version must sign alike (computed apart, with Python's hmac).
    @Test func theSignatureIsTheDocumentedHMAC() throws {
        let ring = try TicketKeyRing(keys: [1: Array(0 ..< 32)])
        let proof = ProgressProofs(keyRing: ring).proof(sessionId: "s-1", confirmedFrames: 1_234)
        #expect(proof.mac.map { String(format: "%02x", $0) }.joined()
            == "1b60bdd6a4fabe016c11df40898a1a2699309bb68faf86d51b07f73909eb5de8")
    }

    @Test func aRotatedRingStillChecksProofsOfItsOlderKeys() throws {
        let old = try TicketKeyRing(keys: [1: Array(repeating: 7, count: 32)])
        let rotated = try TicketKeyRing(keys: [1: Array(repeating: 7, count: 32), 2: Array(repeating: 9, count: 32)])
        let proof = ProgressProofs(keyRing: old).proof(sessionId: "s", confirmedFrames: 60)
        #expect(ProgressProofs(keyRing: rotated).check(proof, sessionId: "s") == .success(60))
        #expect(ProgressProofs(keyRing: rotated).proof(sessionId: "s", confirmedFrames: 60).keyId == 2)
        // Asked to sign with the session's tickets' key, it does, while it holds it.
        #expect(ProgressProofs(keyRing: rotated).proof(sessionId: "s", confirmedFrames: 60, keyId: 1).keyId == 1)
        #expect(ProgressProofs(keyRing: old).proof(sessionId: "s", confirmedFrames: 60, keyId: 2).keyId == 1)
        let retired = try TicketKeyRing(keys: [2: Array(repeating: 9, count: 32)])
        #expect(ProgressProofs(keyRing: retired).check(proof, sessionId: "s") == .failure(.unknownKey(1)))
    }
}
