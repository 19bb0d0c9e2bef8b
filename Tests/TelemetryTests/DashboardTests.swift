import Foundation
import NetplayService
import NetplayTestSupport
import NetplayWire
import Testing

/// The dashboard in a real headless Chromium: the DOM must show the services, the session with
/// its peers and graphs, and the events; the screenshot must not be blank.
@Suite("Dashboard in headless Chromium", .serialized, .ownThread)
struct DashboardTests {
    @Test func theDashboardRendersServicesSessionsAndEvents() throws {
        guard let chromium = DebianTools.require("chromium", package: "chromium") else {
            Issue.record("chromium is not installed: apt-get install chromium (make deps installs it)")
            return
        }
        let telemetry = try TelemetryProcess()
        #expect(telemetry.waitUp(), "\(telemetry.process.log)")
        let sample = try TelemetryProcessTests.feed(telemetry)
        defer { sample.kill9() }
        #expect(eventually(within: 10) { httpGet(telemetry.http, "/api/services")?.body.contains("sample-7") ?? false })

        let directory = telemetry.data.appendingPathComponent("chromium")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let common = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
                      "--user-data-dir=\(directory.path)/profile", "--window-size=1280,1000", "--virtual-time-budget=4000"]
        let url = "http://\(telemetry.http)/"
        let dom = try run(chromium, common + ["--dump-dom", url], timeout: 60)
        #expect(dom.status == 0, "\(dom.output.suffix(2000))")
        for expected in ["data-instance=\"sample-7\"", "data-instance=\"telemetry-test\"", "data-session=\"session-42\"",
                         ">ann<", ">bob<", "58 ms", "<polyline", "checksum mismatch at frame 1200"] {
            #expect(dom.output.contains(expected), "the rendered DOM lacks \(expected)")
        }
        #expect(dom.output.contains("<div id=\"services\"><table>"), "the services table was not rendered")

        let shot = directory.appendingPathComponent("dashboard.png").path
        let screenshot = try run(chromium, common + ["--screenshot=\(shot)", url], timeout: 60)
        #expect(FileManager.default.fileExists(atPath: shot), "\(screenshot.output.suffix(2000))")
        // Decode the PNG (python3's zlib) and require real content: many colours and enough
        // pixels away from the background.
        let analysis = try run("/usr/bin/env", ["python3", "-c", Self.pngAnalysis, shot])
        let figures = analysis.output.split(separator: " ").compactMap { Double($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        #expect(figures.count == 2, "\(analysis.output)")
        if figures.count == 2 {
            #expect(figures[0] >= 50, "only \(figures[0]) distinct colours: the page looks blank")
            #expect(figures[1] >= 0.02, "only \(figures[1] * 100)% of pixels differ from the background: the page looks empty")
        }
        if let keep = ProcessInfo.processInfo.environment["NETPLAY_SCREENSHOT_DIR"] {
            try? FileManager.default.copyItem(atPath: shot, toPath: "\(keep)/dashboard.png")
        }
    }

    /// Prints "<distinct colours> <fraction of non-background pixels>" for an 8-bit RGB(A) PNG.
    static let pngAnalysis = #"""
import sys, zlib, struct
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n"
pos, idat, w, h, ctype = 8, b"", 0, 0, 0
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos+8]); body = data[pos+8:pos+8+n]; pos += 12 + n
    if kind == b"IHDR": w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
    elif kind == b"IDAT": idat += body
bpp = {2: 3, 6: 4}[ctype]
raw = zlib.decompress(idat); stride = w * bpp; prev = bytearray(stride); rows = []; i = 0
for y in range(h):
    f = raw[i]; line = bytearray(raw[i+1:i+1+stride]); i += 1 + stride
    for x in range(stride):
        a = line[x-bpp] if x >= bpp else 0; b = prev[x]; c = prev[x-bpp] if x >= bpp else 0
        if f == 1: line[x] = (line[x] + a) & 255
        elif f == 2: line[x] = (line[x] + b) & 255
        elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c; pa, pb, pc = abs(p-a), abs(p-b), abs(p-c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(bytes(line)); prev = line
colours = {}
for row in rows[::2]:
    for x in range(0, stride, bpp * 2):
        px = row[x:x+3]; colours[px] = colours.get(px, 0) + 1
background = max(colours, key=colours.get); total = sum(colours.values())
print(len(colours), 1 - colours[background] / total)
"""#
}
