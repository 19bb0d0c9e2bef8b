import Foundation
import NetplayService
import NetplayTestSupport
import NetplayWire
import Testing

@Suite("netplay-supervisor as a real process", .serialized, .ownThread)
struct SupervisorProcessTests {
    @Test func startsInDependencyOrderAndReachesAllReady() throws {
        let cluster = try SupervisedCluster { sampleCluster(supervisor: $0) }
        let status = try #require(cluster.waitRunning(), "\(cluster.log)")
        #expect(status.services.map(\.instance) == ["a", "b-0", "b-1"])
        #expect(status.services.allSatisfy { $0.ready && $0.pid > 0 && $0.restarts == 0 })
        #expect(status.supervisorPid == UInt32(cluster.process.pid))
        let log = cluster.log
        let aReady = try #require(log.range(of: "a ready"))
        let bStarted = try #require(log.range(of: "b-0 started"))
        #expect(aReady.lowerBound < bStarted.lowerBound, "b must start after a is ready")
        #expect(log.contains(/\nb-1 +\| .* info sample\/b-1: listening/), "child output is echoed with its instance prefix")
        #expect(log.contains("cluster ready"))
        let logFile = cluster.directory.appendingPathComponent("run/logs/b-1.log").path
        #expect(FileManager.default.fileExists(atPath: logFile))
        #expect(FileManager.default.fileExists(atPath: cluster.directory.appendingPathComponent("run/supervisor.pid").path))
    }

    @Test func sigkilledServicesAreRestartedAndReadyWithinTwoSeconds() throws {
        let cluster = try SupervisedCluster { sampleCluster(supervisor: $0) }
        let initial = try #require(cluster.waitRunning(), "\(cluster.log)")
        for victim in initial.services {
            let killedAt = Date()
            kill(Int32(victim.pid), SIGKILL)
            var replaced: ServiceStatus?
            let back = eventually(within: 2) {
                replaced = cluster.instance(victim.instance)
                return replaced.map { $0.state == .ready && $0.pid != victim.pid && $0.pid > 0 } ?? false
            }
            #expect(back, "\(victim.instance) not ready again within 2 s after SIGKILL: \(String(describing: replaced))\n\(cluster.log.suffix(3000))")
            #expect(replaced?.restarts == 1)
            #expect(replaced?.lastSignal == UInt32(SIGKILL))
            #expect(replaced?.lastReason.contains("killed by SIGKILL") == true)
            print("restart-to-ready \(victim.instance): \(String(format: "%.0f", Date().timeIntervalSince(killedAt) * 1000)) ms")
        }
        #expect(cluster.waitRunning(within: 5) != nil)
    }

    @Test func aCrashLoopTripsTheIntensityLimitAndStopsEverything() throws {
        let crashy = """
              crashy:
                command: netplay-sample-service
                args: [--endpoint, nonsense]
            """
        let cluster = try SupervisedCluster {
            sampleCluster(supervisor: $0, replicas: 1, extraServices: crashy, intensity: "{max_restarts: 3, period: 30s}")
        }
        let status = cluster.process.waitForExit(seconds: 20)
        _ = eventually(within: 2) { cluster.log.contains("netplay-supervisor: restart intensity exceeded") }
        #expect(status == 1, "exit status \(String(describing: status))\n\(cluster.log)")
        let lastLine = cluster.log.split(separator: "\n").last.map(String.init) ?? ""
        #expect(lastLine.hasPrefix("netplay-supervisor: restart intensity exceeded: crashy"), "\(lastLine)")
        #expect(lastLine.contains("more than 3 restarts in 30 s"), "\(lastLine)")
        #expect(lastLine.contains("--endpoint must look like"), "the child's own last words explain why: \(lastLine)")
        let pids = cluster.log.matches(of: /started command=.* pid=(\d+)/).compactMap { Int32($0.output.1) }
        #expect(!pids.isEmpty)
        #expect(pids.allSatisfy(processIsGone), "children left behind: \(pids.filter { !processIsGone($0) })")
    }

    @Test func aCrashLoopingNonCriticalServiceIsGivenUpWhileTheClusterKeepsRunning() throws {
        // Like a telemetry that crashes on every start: the cluster's own intensity (3 in 30 s)
        // would stop everything if its restarts counted there.
        let crashy = """
              crashy:
                command: netplay-sample-service
                critical: false
                intensity: {max_restarts: 3, period: 30s}
                cool_down: 3s
                args: [--endpoint, nonsense]
            """
        let cluster = try SupervisedCluster {
            sampleCluster(supervisor: $0, replicas: 1, extraServices: crashy, intensity: "{max_restarts: 3, period: 30s}")
        }
        #expect(eventually(within: 15) { cluster.log.contains("giving up on crashy for 3.00 s") }, "\(cluster.log)")
        var status: ClusterStatusResponse?
        let othersReady = eventually(within: 10) {
            status = cluster.status()
            return status?.services.filter { $0.service != "crashy" }.allSatisfy { $0.state == .ready } ?? false
        }
        #expect(othersReady, "\(String(describing: status))\n\(cluster.log)")
        let given = try #require(status?.services.first { $0.instance == "crashy" })
        #expect(given.state == .failed && given.pid == 0, "\(given)")
        #expect(given.lastReason.contains("gave up") && given.lastReason.contains("more than 3 restarts in 30 s"), "\(given.lastReason)")
        #expect(given.lastReason.contains("--endpoint must look like"), "the last failure says why: \(given.lastReason)")
        #expect(given.nextRestartUnixMs > UInt64(Date().timeIntervalSince1970 * 1000) - 1000, "the status says when it is tried again")
        #expect(status?.state == .degraded, "the cluster runs without it, and says so")
        #expect(cluster.log.contains(" error supervisor"), "giving up is logged as an error")
        let others = try #require(status?.services.filter { $0.service != "crashy" })

        // After the cool-down it is tried again with a fresh window, and given up on again.
        #expect(eventually(within: 15) { cluster.log.contains("retrying crashy after its cool-down") }, "\(cluster.log)")
        #expect(eventually(within: 15) { cluster.log.components(separatedBy: "giving up on crashy").count >= 3 }, "\(cluster.log)")
        #expect((cluster.instance("crashy")?.restarts ?? 0) > given.restarts)
        #expect(cluster.process.process.isRunning, "\(cluster.log)")
        #expect(!cluster.log.contains("restart intensity exceeded"))
        let now = try #require(cluster.status())
        for service in others {
            #expect(now.services.first { $0.instance == service.instance }.map { $0.state == .ready && $0.pid == service.pid } == true,
                    "\(service.instance) kept running untouched")
        }

        // An operator's restart retries it at once, before the cool-down ends.
        _ = eventually(within: 5) { cluster.instance("crashy")?.state == .failed }
        _ = try cluster.client.request(.restartServiceRequest(RestartServiceRequest(service: "crashy")))
        #expect(eventually(within: 5) { cluster.log.contains("crashy retried on request before its cool-down ended") })
    }

    /// A child's last line goes into every status reply: one with a NUL, or longer than the
    /// wire's 512 bytes counted in characters (é is two bytes), failed each reply's encoding, and
    /// `cluster status` answered INTERNAL until that child exited again.
    @Test func aChildsGarbledLastWordsLeaveTheStatusReadable() throws {
        let garbled = """
              garbled:
                command: /bin/sh
                args: [-c, "printf 'bad\\\\000line '; printf 'é%.0s' $$(seq 600); echo; sleep 0.3; exit 3"]
                readiness: started
                critical: false
                cool_down: 60s
                intensity: {max_restarts: 1, period: 60s}
            """
        let cluster = try SupervisedCluster { sampleCluster(supervisor: $0, replicas: 1, extraServices: garbled) }
        var status: ClusterStatusResponse?
        let reported = eventually(within: 15) {
            status = cluster.status()
            return status?.services.first { $0.instance == "garbled" }?.lastReason.contains("last output") ?? false
        }
        #expect(reported, "\(String(describing: status))\n\(cluster.log.suffix(3000))")
        let reason = try #require(status?.services.first { $0.instance == "garbled" }?.lastReason)
        #expect(reason.contains("bad\\u{0}line éé"), "\(reason)")
        #expect(reason.utf8.count <= 512 && !reason.contains("\u{0}"), "\(reason.utf8.count) bytes")
    }

    /// A scale-up whose replica would bind another service's port is refused with the reason
    /// (it started a replica that failed to bind and restarted until the cluster stopped).
    @Test func aScaleOntoAnotherServicesPortIsRefusedWithTheReason() throws {
        let b = freePortBlock(8)
        let c = "  c:\n    command: netplay-sample-service\n    endpoints: {endpoint: \"tcp://127.0.0.1:\(b + 2)\", events: none}"
        let cluster = try SupervisedCluster { sampleCluster(supervisor: $0, replicas: 1, extraServices: c, supervisorExtra: "max_replicas: 4", bPort: b) }
        _ = try #require(cluster.waitRunning(), "\(cluster.log)")
        #expect(cluster.log.contains("b can be scaled to 2 replicas, not supervisor.max_replicas (4): b-2 would bind port \(b + 2), which c's endpoint binds"),
                "\(cluster.log.suffix(2000))")
        let reply = try cluster.client.requestEnvelope(.scaleServiceRequest(ScaleServiceRequest(service: "b", replicas: 3)))
        guard case .error(let error) = reply.body else { Issue.record("scaling onto c's port succeeded: \(reply.body)"); return }
        #expect(error.code == .badRequest && error.message.contains("at most 2, as b-2 would bind port \(b + 2)"), "\(error.message)")
        guard case .scaleServiceResponse(let scaled) = try cluster.client.request(.scaleServiceRequest(ScaleServiceRequest(service: "b", replicas: 2))) else {
            Issue.record("scaling to 2 was refused")
            return
        }
        #expect(scaled.replicas == 2)
    }

    /// A non-critical service given up on stays down until its cool-down ends: replicas a
    /// scale adds meanwhile wait too (they started at once, crash-looping on).
    @Test func aServiceGivenUpOnIsNotStartedByAScale() throws {
        let crashy = """
              crashy:
                command: netplay-sample-service
                critical: false
                replicas: 1
                intensity: {max_restarts: 2, period: 30s}
                cool_down: 60s
                args: [--endpoint, nonsense]
            """
        let cluster = try SupervisedCluster { sampleCluster(supervisor: $0, replicas: 1, extraServices: crashy) }
        #expect(eventually(within: 15) { cluster.log.contains("giving up on crashy") }, "\(cluster.log.suffix(2000))")
        guard case .scaleServiceResponse = try cluster.client.request(.scaleServiceRequest(ScaleServiceRequest(service: "crashy", replicas: 3))) else {
            Issue.record("the scale was refused")
            return
        }
        Thread.sleep(forTimeInterval: 2)
        let services: [ServiceStatus] = cluster.status()?.services ?? []
        let added = services.filter { $0.service == "crashy" && $0.replica > 0 }
        let untouched = added.filter { $0.state == .waiting && $0.restarts == 0 && $0.lastExitCode == -1 }
        let shown = added.map { "\($0.instance) \($0.state) restarts \($0.restarts) exit \($0.lastExitCode)" }
        #expect(added.count == 2 && untouched.count == 2, "new replicas ran during the cool-down: \(shown)")
    }

    @Test func scaleAboveMaxReplicasIsRefusedAndChangesNothing() throws {
        let cluster = try SupervisedCluster { sampleCluster(supervisor: $0, replicas: 1, supervisorExtra: "max_replicas: 3") }
        let before = try #require(cluster.waitRunning(), "\(cluster.log)")
        let reply = try cluster.client.requestEnvelope(.scaleServiceRequest(ScaleServiceRequest(service: "b", replicas: 4)))
        guard case .error(let error) = reply.body else { Issue.record("scaling past max_replicas succeeded: \(reply.body)"); return }
        #expect(error.code == .badRequest && error.field == "ScaleServiceRequest.replicas")
        #expect(error.message.contains("at most 3 (supervisor.max_replicas"), "\(error.message)")
        usleep(300_000)
        let after = try #require(cluster.status())
        #expect(after.services.map(\.instance) == before.services.map(\.instance) && after.services.map(\.pid) == before.services.map(\.pid))
        #expect(after.state == .running)
        let allowed = try cluster.client.request(.scaleServiceRequest(ScaleServiceRequest(service: "b", replicas: 3)))
        guard case .scaleServiceResponse(let scaled) = allowed else { Issue.record("\(allowed)"); return }
        #expect(scaled.replicas == 3)
    }

    @Test func sigtermStopsEveryChildInReverseOrderAndLeavesNothingBehind() throws {
        let cluster = try SupervisedCluster { sampleCluster(supervisor: $0, replicas: 2, stopTimeout: "1s") }
        let status = try #require(cluster.waitRunning(), "\(cluster.log)")
        let pids = status.services.map { Int32($0.pid) }
        cluster.process.send(SIGTERM)
        let exit = cluster.process.waitForExit(seconds: 10)
        #expect(exit == 0, "\(cluster.log)")
        #expect(pids.allSatisfy(processIsGone), "children left behind")
        let log = cluster.log
        let bStopped = try #require(log.range(of: "b-1 stopped"))
        let aStopping = try #require(log.range(of: "a stopping"))
        #expect(bStopped.lowerBound < aStopping.lowerBound, "dependents stop before their dependencies")
        #expect(!FileManager.default.fileExists(atPath: cluster.directory.appendingPathComponent("run/supervisor.pid").path))
    }

    @Test func aChildThatIgnoresSigtermIsKilledAfterTheStopTimeout() throws {
        let cluster = try SupervisedCluster {
            sampleCluster(supervisor: $0, replicas: 1, stopTimeout: "500ms", bArguments: "[--drain-ms, \"60000\"]")
        }
        let status = try #require(cluster.waitRunning(), "\(cluster.log)")
        let started = Date()
        cluster.process.send(SIGINT)
        #expect(cluster.process.waitForExit(seconds: 10) == 0, "\(cluster.log)")
        #expect(Date().timeIntervalSince(started) < 5)
        #expect(cluster.log.contains("b-0 did not stop within 0.50 s; sending SIGKILL"), "\(cluster.log)")
        #expect(status.services.allSatisfy { processIsGone(Int32($0.pid)) })
    }

    /// A child that writes without pause (`yes`) keeps its pipe full: the supervisor read it in
    /// one loop until the pipe was empty, which never came, and answered nothing (not even
    /// SIGTERM) at 100 % CPU. It reads a bounded amount per turn of its loop.
    @Test func aChildWritingWithoutPauseHoldsTheSupervisorUpInNothing() throws {
        let chatty = "  chatty:\n    command: /usr/bin/yes\n    readiness: started\n    critical: false"
        let cluster = try SupervisedCluster({ sampleCluster(supervisor: $0, replicas: 1, extraServices: chatty) },
                                            extraArguments: ["--quiet"])
        _ = try #require(cluster.waitRunning(), "\(cluster.log)")
        for _ in 0 ..< 10 {
            #expect(cluster.instance("chatty")?.state == .ready, "no status while chatty writes")
            Thread.sleep(forTimeInterval: 0.2)
        }
        cluster.process.send(SIGTERM)
        #expect(cluster.process.waitForExit(seconds: 10) == 0, "the supervisor did not stop: \(cluster.log.suffix(2000))")
    }

    /// A console that does not read (`netplay-supervisor | less` left unscrolled, Ctrl-S in
    /// the terminal): writing a child's lines to it blocked the supervisor's loop, so nothing was
    /// reaped, answered or stopped, and every child blocked on its next log line. The console
    /// here is a pipe nobody reads while a child writes without pause.
    @Test func aConsoleThatDoesNotReadHoldsTheSupervisorUpInNothing() throws {
        let stuck = Pipe()
        let chatty = "  chatty:\n    command: /usr/bin/yes\n    readiness: started\n    critical: false"
        let cluster = try SupervisedCluster({ sampleCluster(supervisor: $0, replicas: 1, extraServices: chatty) }, console: stuck.fileHandleForWriting)
        _ = try #require(cluster.waitRunning(), "\(cluster.log)")
        // Answered throughout (a blocked loop answers none: a status may miss its 1 s on this
        // 2-core machine while `yes` and the supervisor share it).
        var answered = 0
        for _ in 0 ..< 10 {
            if cluster.instance("chatty")?.state == .ready { answered += 1 }
            Thread.sleep(forTimeInterval: 0.2)
        }
        #expect(answered >= 8, "\(answered) of 10 status requests answered while the console is stuck")
        // The console is told what it missed once it reads again.
        var drained = Data()
        let reader = stuck.fileHandleForReading
        let note = eventually(within: 10) {
            drained = reader.availableData
            return String(decoding: drained.suffix(1 << 16), as: UTF8.self).contains("console lines dropped while the console was not reading")
                || cluster.process.process.isRunning == false
        }
        #expect(note, "no note of the dropped lines")
        cluster.process.send(SIGTERM)
        #expect(cluster.process.waitForExit(seconds: 10) == 0, "the supervisor did not stop: \(cluster.log.suffix(2000))")
    }

    /// The stop timeout counts from the first request to stop: a restart asked again and again
    /// (more often than the timeout) re-armed it each time, and a child that ignores SIGTERM was
    /// never killed.
    @Test func askingAgainDoesNotPushTheSigkillBack() throws {
        // b ignores SIGTERM for as long as its own drain lets it (about a second): a SIGKILL
        // 300 ms after the first request, whatever is asked meanwhile, comes before that.
        let cluster = try SupervisedCluster {
            sampleCluster(supervisor: $0, replicas: 1, stopTimeout: "300ms", bArguments: "[--drain-ms, \"60000\"]")
        }
        _ = try #require(cluster.waitRunning(), "\(cluster.log)")
        let before = try #require(cluster.instance("b-0")?.pid)
        for _ in 0 ..< 8 {  // every 100 ms for 0.8 s
            _ = try? cluster.client.request(.restartServiceRequest(RestartServiceRequest(service: "b", kill: false)))
            Thread.sleep(forTimeInterval: 0.1)
        }
        #expect(processIsGone(Int32(before)), "b-0 (ignoring SIGTERM) was not killed within 0.8 s of the first request")
        #expect(cluster.log.contains("b-0 did not stop within 0.30 s; sending SIGKILL"), "\(cluster.log.suffix(2000))")
    }

    @Test func childrenDieWhenTheSupervisorIsKilled() throws {
        let cluster = try SupervisedCluster { sampleCluster(supervisor: $0, replicas: 1) }
        let status = try #require(cluster.waitRunning(), "\(cluster.log)")
        cluster.process.kill9()
        let pids = status.services.map { Int32($0.pid) }
        #expect(eventually(within: 3) { pids.allSatisfy(processIsGone) }, "orphans after SIGKILL of the supervisor")
    }

    @Test func scaleRestartAndStopThroughTheControlEndpoint() throws {
        let cluster = try SupervisedCluster { sampleCluster(supervisor: $0, replicas: 1) }
        _ = try #require(cluster.waitRunning(), "\(cluster.log)")
        let reply = try cluster.client.request(.scaleServiceRequest(ScaleServiceRequest(service: "b", replicas: 3)))
        guard case .scaleServiceResponse(let scaled) = reply else { Issue.record("\(reply)"); return }
        #expect(scaled.previousReplicas == 1 && scaled.replicas == 3)
        let three = try #require(cluster.waitRunning(within: 10))
        #expect(three.services.map(\.instance) == ["a", "b-0", "b-1", "b-2"])
        let removed = three.services.filter { $0.instance == "b-1" || $0.instance == "b-2" }.map { Int32($0.pid) }
        _ = try cluster.client.request(.scaleServiceRequest(ScaleServiceRequest(service: "b", replicas: 1)))
        #expect(eventually(within: 5) { cluster.status()?.services.map(\.instance) == ["a", "b-0"] && removed.allSatisfy(processIsGone) })
        #expect(cluster.waitRunning(within: 5) != nil)

        // Errors are replies, never silence.
        #expect(throws: ClientError.self) { try cluster.client.request(.scaleServiceRequest(ScaleServiceRequest(service: "a", replicas: 2))) }
        #expect(throws: ClientError.self) { try cluster.client.request(.scaleServiceRequest(ScaleServiceRequest(service: "nope", replicas: 2))) }
        let unknown = try cluster.client.requestEnvelope(.restartServiceRequest(RestartServiceRequest(service: "nope")))
        guard case .error(let error) = unknown.body else { Issue.record("restart of an unknown service succeeded"); return }
        #expect(error.code == .notFound)

        let before = try #require(cluster.instance("a"))
        let restartReply = try cluster.client.request(.restartServiceRequest(RestartServiceRequest(service: "a")))
        guard case .restartServiceResponse(let restarted) = restartReply else { Issue.record("\(restartReply)"); return }
        #expect(restarted.instances.map(\.instance) == ["a"])
        #expect(eventually(within: 5) { cluster.instance("a").map { $0.state == .ready && $0.pid != before.pid } ?? false })
        #expect(cluster.instance("a")?.restarts == 1)

        let ack = try cluster.client.request(.stopClusterRequest(StopClusterRequest(reason: "test over")))
        guard case .ack = ack else { Issue.record("\(ack)"); return }
        #expect(cluster.process.waitForExit(seconds: 10) == 0)
        #expect(cluster.log.contains("stop requested: test over"))
    }

    @Test func netplayctlClusterVerbs() throws {
        let cluster = try SupervisedCluster { sampleCluster(supervisor: $0, replicas: 1) }
        _ = try #require(cluster.waitRunning(), "\(cluster.log)")
        let status = try ServiceProcess("netplayctl", ["cluster", "status", "--supervisor", cluster.endpoint], environment: cluster.netplayctlEnvironment)
        #expect(status.waitForExit(seconds: 10) == 0, "\(status.log)")
        #expect(status.log.contains("cluster test running: 2/2 ready"), "\(status.log)")
        #expect(status.log.contains("b-0"))
        let json = try ServiceProcess("netplayctl", ["cluster", "status", "--json"], environment: cluster.netplayctlEnvironment.merging(["NETPLAY_SUPERVISOR": cluster.endpoint]) { $1 })
        #expect(json.waitForExit(seconds: 10) == 0)
        #expect((try? JSONSerialization.jsonObject(with: Data(json.log.utf8))) != nil, "\(json.log)")
        let scale = try ServiceProcess("netplayctl", ["cluster", "scale", "b", "2", "--supervisor", cluster.endpoint], environment: cluster.netplayctlEnvironment)
        #expect(scale.waitForExit(seconds: 10) == 0, "\(scale.log)")
        #expect(scale.log.contains("b: 1 -> 2 replicas"))
        let wait = try ServiceProcess("netplayctl", ["cluster", "status", "--wait-ready", "10", "--supervisor", cluster.endpoint], environment: cluster.netplayctlEnvironment)
        #expect(wait.waitForExit(seconds: 15) == 0, "\(wait.log)")
        #expect(wait.log.contains("3/3 ready"))
        let restart = try ServiceProcess("netplayctl", ["cluster", "restart", "b", "--instance", "b-1", "--supervisor", cluster.endpoint], environment: cluster.netplayctlEnvironment)
        #expect(restart.waitForExit(seconds: 10) == 0, "\(restart.log)")
        #expect(restart.log.contains("restarting b-1"))
        let bad = try ServiceProcess("netplayctl", ["cluster", "scale", "a", "3", "--supervisor", cluster.endpoint], environment: cluster.netplayctlEnvironment)
        #expect(bad.waitForExit(seconds: 10) == 1)
        #expect(bad.log.contains("not replicated"), "\(bad.log)")
        let stop = try ServiceProcess("netplayctl", ["cluster", "stop", "--supervisor", cluster.endpoint], environment: cluster.netplayctlEnvironment)
        #expect(stop.waitForExit(seconds: 10) == 0, "\(stop.log)")
        #expect(cluster.process.waitForExit(seconds: 10) == 0)
    }

    @Test func aHungServiceIsKilledWhenItsHeartbeatsStop() throws {
        let cluster = try SupervisedCluster { sampleCluster(supervisor: $0, replicas: 1) }
        let status = try #require(cluster.waitRunning(), "\(cluster.log)")
        let victim = try #require(status.services.first { $0.instance == "b-0" })
        kill(Int32(victim.pid), SIGSTOP)
        defer { kill(Int32(victim.pid), SIGKILL) }
        let replaced = eventually(within: 6) {
            cluster.instance("b-0").map { $0.state == .ready && $0.pid != victim.pid } ?? false
        }
        #expect(replaced, "\(cluster.log.suffix(2000))")
        #expect(cluster.instance("b-0")?.lastReason.contains("no heartbeat for 2.00 s") == true)
    }

    @Test func logFilesRotate() throws {
        // b prints a line per request; rotation at 4 KiB keeps b-0.log, .1 and .2 only.
        let cluster = try SupervisedCluster { sampleCluster(supervisor: $0, replicas: 1) }
        _ = try #require(cluster.waitRunning(), "\(cluster.log)")
        for _ in 0..<30 {
            _ = try cluster.client.request(.restartServiceRequest(RestartServiceRequest(service: "b", kill: true)))
            _ = cluster.waitRunning(within: 5)
        }
        let logs = cluster.directory.appendingPathComponent("run/logs")
        let names = try FileManager.default.contentsOfDirectory(atPath: logs.path).filter { $0.hasPrefix("b-0") }.sorted()
        #expect(names == ["b-0.log", "b-0.log.1", "b-0.log.2"], "\(names)")
        for name in names {
            let size = (try FileManager.default.attributesOfItem(atPath: logs.appendingPathComponent(name).path)[.size] as? Int) ?? 0
            #expect(size <= 4096 + 1024, "\(name) is \(size) bytes")
        }
    }

    @Test(arguments: [
        ("services:\n  a: {command: netplay-sample-service, depends_on: [ghost]}", "unknown service 'ghost'"),
        ("services:\n  a: {command: netplay-sample-service, depends_on: [b]}\n  b: {command: netplay-sample-service, depends_on: [a]}", "dependency cycle: a -> b -> a"),
        ("services:\n  a: {command: netplay-sample-service, replicas: lots}", "replicas: must be an integer from 0 to 16"),
        ("services:\n  a: {command: netplay-no-such-binary}", "'netplay-no-such-binary' not found"),
        // Nested aliases with one used as a mapping key: composing the file hashed that key's
        // node expanded (10^10 values) to check for duplicate keys, and the supervisor spun for good.
        ((1 ... 10).map { level in "x-l\(level): &l\(level) [" + Array(repeating: level == 1 ? "lol" : "*l\(level - 1)", count: 10).joined(separator: ", ") + "]" }
            .joined(separator: "\n") + "\nx-key: {*l10 : 1}\nservices:\n  a: {command: netplay-sample-service}",
         "line 2, column 12: YAML aliases (*name) are not supported"),
    ])
    func badClusterFilesExitWithOneLine(yaml: String, expected: String) throws {
        let cluster = try SupervisedCluster { _ in yaml }
        let status = cluster.process.waitForExit(seconds: 10)
        _ = eventually(within: 2) { cluster.log.hasSuffix("\n") }  // the pipe reader may lag the exit
        #expect(status == 2, "\(cluster.log)")
        let lines = cluster.log.split(separator: "\n")
        #expect(lines.count == 1, "\(cluster.log)")
        #expect(lines.first?.hasPrefix("netplay-supervisor: cluster.yaml: ") == true || lines.first?.hasPrefix("netplay-supervisor: services.") == true,
                "\(cluster.log)")
        #expect(cluster.log.contains(expected), "\(cluster.log)")
    }

    @Test func aSecondSupervisorOnTheSameRunDirectoryRefusesToStart() throws {
        let cluster = try SupervisedCluster { sampleCluster(supervisor: $0, replicas: 1) }
        _ = try #require(cluster.waitRunning(), "\(cluster.log)")
        let second = try ServiceProcess("netplay-supervisor", ["--config", cluster.directory.appendingPathComponent("cluster.yaml").path,
                                                               "--run-dir", cluster.directory.appendingPathComponent("run").path,
                                                               "--endpoint", TestPorts.endpoint()])
        #expect(second.waitForExit(seconds: 10) == 2)
        _ = eventually(within: 2) { second.log.hasSuffix("\n") }
        #expect(second.log.contains("a cluster is already running"), "\(second.log)")
    }
}
