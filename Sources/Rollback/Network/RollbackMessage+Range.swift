/// The numbers a message may carry. The wire holds frames in 32-bit fields (docs/rollback.md),
/// and the engine's frame arithmetic assumes it; `P2PSession` and `SpectatorSession` take
/// messages from any transport a caller writes, so they drop a message with a frame, frame count
/// or frame advantage outside ``RollbackMessage/frameRange`` instead of trapping on an overflow
/// (an `ackFrame` of `Int.max` did, at the next poll).
extension RollbackMessage {
    /// Frames, frame counts and advantages a message may hold: a 32-bit signed integer's.
    public static let frameRange: ClosedRange<Int> = Int(Int32.min) ... Int(Int32.max)

    /// Whether every frame-like field fits ``frameRange`` (an input run's end included).
    public var isWithinFrameRange: Bool {
        let range = Self.frameRange
        switch self {
        case .syncRequest, .syncReply, .keepAlive, .qualityReply:
            return true
        case .input(let message):
            return range.contains(message.startFrame) && message.inputs.count <= range.upperBound
                && range.contains(message.startFrame + message.inputs.count)
                && range.contains(message.ackFrame) && range.contains(message.confirmedFrame) && range.contains(message.senderFrame)
        case .inputAck(let ack):
            return range.contains(ack.ackFrame) && range.contains(ack.confirmedFrame) && range.contains(ack.senderFrame)
        case .qualityReport(let report):
            return range.contains(report.frame) && range.contains(report.frameAdvantage)
        case .checksumReport(let report):
            return range.contains(report.frame)
        case .disconnectNotice(let notice):
            return range.contains(notice.frame)
        case .stateRequest(let request):
            return range.contains(request.confirmedFrame)
        case .stateTransfer(let transfer):
            return range.contains(transfer.frame)
        }
    }
}
