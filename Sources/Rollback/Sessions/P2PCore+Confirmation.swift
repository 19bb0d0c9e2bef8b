import Foundation

// P2PCore: confirmation, checksums and time sync.
extension P2PCore {
    // MARK: - Confirmation, checksums, time sync

    mutating func updateConfirmation() {
        var local = Frame.max
        for queue in inputs.queues {
            let frame = queue.confirmedFrame(authoritative: authorityMode)
            if frame < local { local = frame }
        }
        localConfirmedFrame = local
        var global = local
        if !authorityMode {
            for endpoint in endpoints where endpoint.kind == .peer && endpoint.isAlive
                && endpoint.reportedConfirmedFrame < global {
                global = endpoint.reportedConfirmedFrame
            }
        }
        if global > confirmedFrame {
            confirmedFrame = global
            for index in endpoints.indices
            where endpoints[index].kind == .spectator && endpoints[index].phase == .running {
                sendSpectatorInputs(to: index, force: false)
            }
        }
        reportChecksums()
    }

    /// Sends the checksums of checksum frames that became final and compares them with
    /// what remote endpoints reported.
    mutating func reportChecksums() {
        guard desync.nextReportFrame <= currentFrame,
              desync.nextReportFrame - 1 <= confirmedFrame else { return }
        let validThrough = min(currentFrame, inputs.firstIncorrectFrame ?? .max)
        let reports = desync.confirm(upTo: confirmedFrame, validThrough: validThrough, history: inputs.checksums,
                                     desyncs: &desyncScratch)
        for report in reports {
            for index in endpoints.indices where endpoints[index].phase == .running {
                send(.checksumReport(report), to: index)
            }
        }
        flushDesyncs()
    }

    mutating func flushDesyncs() {
        guard !desyncScratch.isEmpty else { return }
        for report in desyncScratch { events.append(.desync(report)) }
        desyncScratch.removeAll(keepingCapacity: true)
    }

    mutating func updateTimeSync() {
        let frame = currentFrame
        let recommending = frame >= nextRecommendationFrame
        var ahead = 0.0
        for index in endpoints.indices where endpoints[index].phase == .running && endpoints[index].kind != .spectator {
            let advantage = endpoints[index].estimateAdvantage(localFrame: frame, now: now,
                                                               framesPerSecond: configuration.framesPerSecond)
            endpoints[index].localAdvantage = advantage
            endpoints[index].stats.localFramesBehind = advantage
            endpoints[index].timeSync.record(localAdvantage: advantage, remoteAdvantage: endpoints[index].remoteAdvantage)
            // Only a positive average can raise `ahead` above 0: the two divisions behind
            // `framesAhead` (a few dozen cycles of latency) are skipped when this peer is not ahead.
            if recommending && endpoints[index].timeSync.isAhead {
                ahead = max(ahead, endpoints[index].timeSync.framesAhead)
            }
        }
        guard recommending else { return }
        let wait = roundedToInt(ahead)
        if wait >= configuration.minimumWaitFrames {
            events.append(.waitRecommendation(frames: min(wait, configuration.maximumWaitFrames)))
            nextRecommendationFrame = frame + configuration.recommendationIntervalFrames
        }
    }
}
