import Foundation
import Testing
@testable import NetplayService
import NetplayTestSupport

@Suite("Process CPU meter", .ownThread)
struct ProcessCPUMeterTests {
    @Test func percentIsCPUTimeOverWallTimeSinceTheLastReading() {
        var meter = ProcessCPUMeter(from: .init(cpuMicroseconds: 1_000_000, wallMicroseconds: 50_000_000))
        // Half a second of CPU in one second: 50 %.
        #expect(meter.percent(at: .init(cpuMicroseconds: 1_500_000, wallMicroseconds: 51_000_000)) == 50)
        // Two threads busy for the next half second: 200 %.
        #expect(meter.percent(at: .init(cpuMicroseconds: 2_500_000, wallMicroseconds: 51_500_000)) == 200)
        // No time passed, or a clock that went back: 0, and the reading is the new start.
        #expect(meter.percent(at: .init(cpuMicroseconds: 2_500_000, wallMicroseconds: 51_500_000)) == 0)
        #expect(meter.percent(at: .init(cpuMicroseconds: 2_400_000, wallMicroseconds: 52_000_000)) == 0)
        #expect(meter.percent(at: .init(cpuMicroseconds: 2_500_000, wallMicroseconds: 53_000_000)) == 10)
    }

    @Test func aBusyThreadShowsInTheProcessReading() {
        let before = ProcessCPUMeter.Reading.now()
        var meter = ProcessCPUMeter(from: before)
        // Spin until this process has used 50 ms of CPU (whatever else runs meanwhile).
        var spins: UInt64 = 0
        while ProcessCPUMeter.Reading.now().cpuMicroseconds - before.cpuMicroseconds < 50_000 { spins &+= 1 }
        let after = ProcessCPUMeter.Reading.now()
        #expect(after.wallMicroseconds > before.wallMicroseconds)
        #expect(meter.percent(at: after) > 0)
        #expect(spins > 0)
    }
}
