import Foundation
import MemberwiseInit
import NetplayWire

/// The latest metric snapshot of every reporting instance, keyed by service and instance, and
/// its rendering as Prometheus text (exposition format 0.0.4).
///
/// Names must follow the toolkit's conventions (prefix `netplay_`, Prometheus charset, counters
/// end in `_total`); a metric that breaks them is dropped and counted, so one bad service never
/// makes the whole scrape invalid. Instances silent for longer than ``forgetAfter`` are forgotten.
///
/// Whatever is pushed, the store stays bounded (``Limits``): instances, series and page bytes
/// per instance and in total, labels per metric and the length of names and values. What exceeds
/// a cap is dropped and counted by ``Drop`` reason; what was already stored stays.
public struct MetricStore {
    /// Caps on what the store keeps.
    @PublicMemberwiseInit
    public struct Limits: Sendable, Equatable {
        /// Most instances tracked; a snapshot from a new instance beyond it is dropped.
        public var maxInstances: Int = 256
        /// Most series kept per instance (a histogram counts its buckets, `+Inf`, sum and count).
        public var maxSeriesPerInstance: Int = 2_000
        /// Most series kept in total.
        public var maxSeries: Int = 50_000
        /// Most labels on one metric.
        public var maxLabels: Int = 16
        /// Longest label value, in bytes.
        public var maxLabelValueBytes: Int = 256
        /// Longest metric or label name, service or instance name, in bytes.
        public var maxNameBytes: Int = 128
        /// Longest help text, in bytes.
        public var maxHelpBytes: Int = 512
        /// Most bytes one instance's series may take on the `/metrics` page (``pageBytes(_:identityBytes:)``:
        /// every series repeats its labels, escaped, so within the other caps one instance could
        /// make a page of 20 MB and all of them one of half a gigabyte).
        public var maxPageBytesPerInstance: Int = 2_000 * Limits.pageBytesPerSeriesOfInstance
        /// Most bytes all instances' series may take on the page.
        public var maxPageBytes: Int = 50_000 * Limits.pageBytesPerSeries

        /// Page bytes an instance's series may take on average (2 MB at the default 2,000):
        /// telemetry's options scale ``maxPageBytesPerInstance`` with the series cap by it.
        public static let pageBytesPerSeriesOfInstance = 1_024
        /// Page bytes all series may take on average (32 MiB at the default 50,000); a gauge
        /// with two short labels takes about 250.
        public static let pageBytesPerSeries = 672
    }

    /// Why pushed data was dropped for exceeding a cap (whole snapshots for the first two,
    /// single metrics for the rest).
    public enum Drop: String, Sendable, CaseIterable {
        /// A new instance while ``Limits/maxInstances`` are tracked.
        case tooManyInstances = "too_many_instances"
        /// A service or instance name that is empty, too long or holds control characters.
        case badIdentity = "bad_identity"
        /// Over ``Limits/maxSeriesPerInstance``.
        case tooManySeriesPerInstance = "too_many_series_per_instance"
        /// Over ``Limits/maxSeries``.
        case tooManySeries = "too_many_series"
        /// Over ``Limits/maxLabels``.
        case tooManyLabels = "too_many_labels"
        /// A name, label value or help text over its length cap.
        case tooLong = "too_long"
        /// Over ``Limits/maxPageBytesPerInstance`` or ``Limits/maxPageBytes``.
        case tooManyBytes = "too_many_bytes"
    }

    /// What one ``ingest(_:at:)`` dropped.
    public struct Outcome: Sendable, Equatable {
        /// Metrics dropped for breaking the naming rules.
        public var rejections: [Rejection] = []
        /// Snapshots or metrics dropped by cap, with counts.
        public var drops: [Drop: Int] = [:]
    }

    /// One reporting instance.
    public struct Instance: Sendable {
        /// Service kind.
        public var service: String
        /// Instance name.
        public var instance: String
        /// Its latest metrics.
        public var metrics: [Metric]
        /// When its latest snapshot arrived (seconds on the store's clock).
        public var receivedAt: Double
        /// The snapshot's sequence number.
        public var sequence: UInt64
        /// Snapshots received from it.
        public var snapshots: UInt64
        /// Times its sequence went backwards (the process restarted).
        public var restartsSeen: UInt64
        /// When it first reported (seconds on the store's clock).
        public var firstSeen: Double
        /// Series its metrics make.
        public var series: Int = 0
        /// Bytes its series take on the page at most (``MetricStore/pageBytes(_:identityBytes:)``).
        public var pageBytes: Int = 0
    }

    /// Why a metric was dropped.
    public enum Rejection: String, Sendable, CaseIterable {
        /// Not `netplay_` + Prometheus characters.
        case badName = "bad_name"
        /// A counter whose name does not end in `_total`, or a non-histogram ending in `_bucket`, ...
        case badSuffix = "bad_suffix"
        /// A label name outside the Prometheus charset or reserved.
        case badLabel = "bad_label"
        /// Histogram bounds or counts malformed.
        case badHistogram = "bad_histogram"
        /// Kind not set.
        case noKind = "no_kind"
    }

    /// Seconds of silence after which an instance is forgotten.
    public var forgetAfter: Double
    /// The caps.
    public var limits: Limits
    /// Series held now, over all instances.
    public private(set) var seriesCount = 0
    /// Bytes the instances' series take on the page at most, over all instances.
    public private(set) var pageBytes = 0
    /// Pushed data dropped by cap, by reason (since start).
    public private(set) var dropped: [Drop: UInt64] = [:]
    /// Reporting instances by "service/instance".
    public private(set) var instances: [String: Instance] = [:]
    /// Metrics dropped, by reason (since start).
    public private(set) var rejected: [Rejection: UInt64] = [:]
    /// Instances forgotten so far.
    public private(set) var forgotten: UInt64 = 0

    /// Creates an empty store.
    public init(forgetAfter: Double = 20, limits: Limits = Limits()) {
        self.forgetAfter = forgetAfter
        self.limits = limits
    }

    /// Series a metric makes on the page.
    static func series(_ metric: Metric) -> Int {
        metric.kind == .histogram ? metric.bucketBounds.count + 3 : 1
    }

    /// The most bytes a family's `# HELP` and `# TYPE` lines take (once per name in a
    /// snapshot): the help escaped (twice its bytes at worst), the name twice. Uncounted, 2,000
    /// gauges of their own names and 512-byte helps of backslashes made an instance's share of
    /// the page half again its cap.
    static func familyBytes(_ metric: Metric) -> Int {
        "# HELP  \n# TYPE  histogram\n".utf8.count + 2 * metric.name.utf8.count + 2 * metric.help.utf8.count
    }

    /// The most bytes `metric`'s series take on the page: each repeats the name with a suffix,
    /// every label (renamed `exported_` when it is one the page sets) with its value escaped
    /// (twice its bytes at worst), the `service` and `instance` labels the page adds
    /// (`identityBytes`: both names' bytes), a bucket's `le` and the value.
    static func pageBytes(_ metric: Metric, identityBytes: Int) -> Int {
        var line = metric.name.utf8.count + "_bucket{} ".utf8.count + 32  // the value
        for label in metric.labels { line += "exported_".utf8.count + label.key.utf8.count + 2 * label.value.utf8.count + 4 }
        line += "service=\"\",instance=\"\",".utf8.count + 2 * identityBytes
        if metric.kind == .histogram { line += "le=\"\",".utf8.count + 32 }
        return Self.series(metric) * line
    }

    /// Checks `metric` against the length and label caps; nil when it fits.
    func capViolation(_ metric: Metric) -> Drop? {
        if metric.labels.count > limits.maxLabels { return .tooManyLabels }
        if metric.name.utf8.count > limits.maxNameBytes || metric.help.utf8.count > limits.maxHelpBytes { return .tooLong }
        for label in metric.labels where label.key.utf8.count > limits.maxNameBytes || label.value.utf8.count > limits.maxLabelValueBytes {
            return .tooLong
        }
        if metric.kind == .histogram && metric.bucketBounds.count + 3 > limits.maxSeriesPerInstance { return .tooManySeriesPerInstance }
        return nil
    }

    func validIdentity(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= limits.maxNameBytes && !name.unicodeScalars.contains { $0.value < 32 || $0.value == 127 }
    }

    /// Stores `snapshot` as its instance's latest, received at `now` (seconds), within the caps.
    /// Returns what was dropped from it.
    @discardableResult
    public mutating func ingest(_ snapshot: MetricsSnapshot, at now: Double) -> Outcome {
        var outcome = Outcome()
        // No "/" in the service: the key joins the two names with one ("a/b" + "c" and "a" + "b/c"
        // were one key, one instance overwriting the other's series).
        guard validIdentity(snapshot.service), !snapshot.service.contains("/"), validIdentity(snapshot.instance) else {
            outcome.drops[.badIdentity] = 1
            dropped[.badIdentity, default: 0] += 1
            return outcome
        }
        let key = "\(snapshot.service)/\(snapshot.instance)"
        let previous = instances[key]
        guard previous != nil || instances.count < limits.maxInstances else {
            outcome.drops[.tooManyInstances] = 1
            dropped[.tooManyInstances, default: 0] += 1
            return outcome
        }
        let othersSeries = seriesCount - (previous?.series ?? 0)
        let othersBytes = pageBytes - (previous?.pageBytes ?? 0)
        var series = 0
        var bytes = 0
        let identityBytes = snapshot.service.utf8.count + snapshot.instance.utf8.count
        var families = Set<String>()
        var accepted: [Metric] = []
        accepted.reserveCapacity(min(snapshot.metrics.count, limits.maxSeriesPerInstance))
        for metric in snapshot.metrics {
            if let problem = capViolation(metric) { outcome.drops[problem, default: 0] += 1; continue }
            if let problem = Self.check(metric) { outcome.rejections.append(problem); continue }
            let size = Self.series(metric)
            if series + size > limits.maxSeriesPerInstance { outcome.drops[.tooManySeriesPerInstance, default: 0] += 1; continue }
            if othersSeries + series + size > limits.maxSeries { outcome.drops[.tooManySeries, default: 0] += 1; continue }
            var cost = Self.pageBytes(metric, identityBytes: identityBytes)
            if !families.contains(metric.name) { cost += Self.familyBytes(metric) }
            if bytes + cost > limits.maxPageBytesPerInstance || othersBytes + bytes + cost > limits.maxPageBytes {
                outcome.drops[.tooManyBytes, default: 0] += 1
                continue
            }
            series += size
            bytes += cost
            families.insert(metric.name)
            accepted.append(metric)
        }
        for problem in outcome.rejections { rejected[problem, default: 0] += 1 }
        for (drop, count) in outcome.drops { dropped[drop, default: 0] += UInt64(count) }
        var entry = previous ?? Instance(service: snapshot.service, instance: snapshot.instance, metrics: [],
                                         receivedAt: now, sequence: 0, snapshots: 0, restartsSeen: 0, firstSeen: now)
        if entry.snapshots > 0 && snapshot.sequence < entry.sequence { entry.restartsSeen += 1 }
        entry.metrics = accepted
        entry.series = series
        entry.pageBytes = bytes
        entry.receivedAt = now
        entry.sequence = snapshot.sequence
        entry.snapshots += 1
        instances[key] = entry
        seriesCount = othersSeries + series
        pageBytes = othersBytes + bytes
        return outcome
    }

    /// Forgets instances silent for longer than ``forgetAfter``; returns their keys.
    @discardableResult
    public mutating func forgetSilent(at now: Double) -> [String] {
        let gone = instances.filter { now - $0.value.receivedAt > forgetAfter }.map(\.key)
        for key in gone {
            let instance = instances.removeValue(forKey: key)
            seriesCount -= instance?.series ?? 0
            pageBytes -= instance?.pageBytes ?? 0
        }
        forgotten += UInt64(gone.count)
        return gone.sorted()
    }

    /// The instances, sorted by service then instance.
    public var sortedInstances: [Instance] {
        instances.values.sorted { ($0.service, $0.instance) < ($1.service, $1.instance) }
    }

    /// Validates one metric; nil when it may be exposed.
    public static func check(_ metric: Metric) -> Rejection? {
        let name = metric.name
        guard name.hasPrefix("netplay_"), isMetricName(name) else { return .badName }
        switch metric.kind {
        case .unspecified: return .noKind
        case .counter: if !name.hasSuffix("_total") { return .badSuffix }
        case .gauge: if name.hasSuffix("_total") { return .badSuffix }
        case .histogram:
            if name.hasSuffix("_total") { return .badSuffix }
            guard metric.bucketBounds.count == metric.bucketCounts.count,
                  zip(metric.bucketBounds, metric.bucketBounds.dropFirst()).allSatisfy({ $0 < $1 }),
                  zip(metric.bucketCounts, metric.bucketCounts.dropFirst()).allSatisfy({ $0 <= $1 }),
                  metric.bucketCounts.last.map({ $0 <= metric.count }) ?? true,
                  metric.bucketBounds.allSatisfy({ $0.isFinite }) else { return .badHistogram }
        }
        // Not on a histogram either: `H_count` sorts beside histogram `H`, whose samples are named
        // `H_count` too, and strict parsers (promtool, the Go client's) take its HELP for H's
        // second and reject the whole page.
        if ["_bucket", "_count", "_sum"].contains(where: { name.hasSuffix($0) }) { return .badSuffix }
        // Unique names, none of the renamed reporter labels: a sample with one label name twice
        // (`exported_service` given and made from `service`) is invalid to Prometheus, which
        // then fails the whole scrape, every other series included.
        var names = Set<String>()
        for label in metric.labels {
            guard isLabelName(label.key), !label.key.hasPrefix("__"), label.key != "le", !label.key.hasPrefix("exported_"),
                  names.insert(label.key).inserted else { return .badLabel }
        }
        return nil
    }

    static func isMetricName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, first.isASCIILetter || first == "_" || first == ":" else { return false }
        return name.unicodeScalars.allSatisfy { $0.isASCIILetter || $0.isASCIIDigit || $0 == "_" || $0 == ":" }
    }

    static func isLabelName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, first.isASCIILetter || first == "_" else { return false }
        return name.unicodeScalars.allSatisfy { $0.isASCIILetter || $0.isASCIIDigit || $0 == "_" }
    }
}

extension Unicode.Scalar {
    var isASCIILetter: Bool { ("a"..."z").contains(self) || ("A"..."Z").contains(self) }
    var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}

/// Renders metrics as Prometheus text exposition format 0.0.4: one `# HELP` and `# TYPE` per
/// family, samples sorted by labels, the reporting `service` and `instance` as labels (a
/// metric's own label of the same name becomes `exported_service` / `exported_instance`).
public struct PrometheusRenderer {
    /// One sample source: the metric and the labels its reporter adds.
    @PublicMemberwiseInit
    public struct Entry {
        /// The metric.
        public var metric: Metric
        /// Labels added by telemetry (service, instance).
        public var extraLabels: [(String, String)]
        /// Telemetry's own (its metrics, the HUD and RetroArch boards, per-instance report
        /// ages): its kind is the family's, whatever members push under the name.
        public var authoritative: Bool = false
    }

    /// The kind each family is rendered as, for the names sent with more than one kind (the
    /// rest need no vote): telemetry's own, else the one the most reporters send, the first seen
    /// on a tie.
    static func familyKinds(_ entries: [Entry]) -> [String: Metric.Kind] {
        var firstKind: [String: Metric.Kind] = [:]
        var conflicted = Set<String>()
        for entry in entries {
            let name = entry.metric.name
            if let kind = firstKind[name] {
                if kind != entry.metric.kind { conflicted.insert(name) }
            } else {
                firstKind[name] = entry.metric.kind
            }
        }
        guard !conflicted.isEmpty else { return [:] }
        var decided: [String: Metric.Kind] = [:]
        var votes: [String: [(kind: Metric.Kind, reporters: Set<Int>)]] = [:]
        for entry in entries where conflicted.contains(entry.metric.name) {
            let name = entry.metric.name
            if entry.authoritative {
                if decided[name] == nil { decided[name] = entry.metric.kind }
                continue
            }
            var hasher = Hasher()
            for (key, value) in entry.extraLabels { hasher.combine(key); hasher.combine(value) }
            let reporter = hasher.finalize()
            var tally = votes[name] ?? []
            if let index = tally.firstIndex(where: { $0.kind == entry.metric.kind }) {
                tally[index].reporters.insert(reporter)
            } else {
                tally.append((entry.metric.kind, [reporter]))
            }
            votes[name] = tally
        }
        for (name, tally) in votes where decided[name] == nil {
            decided[name] = tally.enumerated().max {
                $0.element.reporters.count < $1.element.reporters.count
                    || ($0.element.reporters.count == $1.element.reporters.count && $0.offset > $1.offset)
            }?.element.kind
        }
        return decided
    }

    /// The content type Prometheus expects.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// Renders `entries`; a family whose kind conflicts keeps telemetry's own kind for it, else
    /// the kind the most reporters (by their labels) send, the first seen on a tie; the rest is
    /// dropped and counted in `conflicts`, with duplicate series. Votes count reporters, not
    /// samples: one member pushing hundreds of series of another kind outvoted every instance's
    /// one, and with the first kind seen winning, a reporter whose name sorted first could drop
    /// every other instance's series of a family.
    public static func render(_ entries: [Entry], conflicts: inout Int) -> String {
        let decided = familyKinds(entries)
        var families: [String: (kind: Metric.Kind, help: String, samples: [(labels: [(String, String)], metric: Metric)])] = [:]
        for entry in entries {
            let metric = entry.metric
            if let kind = decided[metric.name], kind != metric.kind {
                conflicts += 1
                continue
            }
            var labels = entry.extraLabels
            let reserved = Set(labels.map(\.0))
            for label in metric.labels {
                labels.append((reserved.contains(label.key) ? "exported_\(label.key)" : label.key, label.value))
            }
            labels.sort { $0.0 < $1.0 }
            if var family = families[metric.name] {
                guard family.kind == metric.kind else { conflicts += 1; continue }
                if family.help.isEmpty { family.help = metric.help }
                family.samples.append((labels, metric))
                families[metric.name] = family
            } else {
                families[metric.name] = (metric.kind, metric.help, [(labels, metric)])
            }
        }
        var out = ""
        out.reserveCapacity(entries.count * 96)
        for name in families.keys.sorted() {
            let family = families[name]!
            let help = family.help.isEmpty ? name.replacingOccurrences(of: "_", with: " ") : family.help
            out += "# HELP \(name) \(escapeHelp(help))\n"
            out += "# TYPE \(name) \(typeName(family.kind))\n"
            var seen = Set<String>()
            // Each sample's label text made once (the sort compared texts it made again each time).
            let samples = family.samples.map { (key: labelText($0.labels), labels: $0.labels, metric: $0.metric) }
                .sorted { $0.key < $1.key }
            for sample in samples {
                let key = sample.key
                guard seen.insert(key).inserted else { conflicts += 1; continue }  // duplicate series
                let metric = sample.metric
                if family.kind == .histogram {
                    for (bound, count) in zip(metric.bucketBounds, metric.bucketCounts) {
                        out += "\(name)_bucket\(labelText(sample.labels + [("le", number(bound))])) \(count)\n"
                    }
                    out += "\(name)_bucket\(labelText(sample.labels + [("le", "+Inf")])) \(metric.count)\n"
                    out += "\(name)_sum\(key) \(number(metric.sum))\n"
                    out += "\(name)_count\(key) \(metric.count)\n"
                } else {
                    out += "\(name)\(key) \(number(metric.value))\n"
                }
            }
        }
        return out
    }

    static func typeName(_ kind: Metric.Kind) -> String {
        switch kind {
        case .counter: return "counter"
        case .gauge: return "gauge"
        case .histogram: return "histogram"
        case .unspecified: return "untyped"
        }
    }

    /// Prometheus float formatting: integers without a fraction, `+Inf`, `-Inf`, `NaN`.
    static func number(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }

    static func labelText(_ labels: [(String, String)]) -> String {
        guard !labels.isEmpty else { return "" }
        return "{" + labels.map { "\($0.0)=\"\(escapeLabel($0.1))\"" }.joined(separator: ",") + "}"
    }

    static func escapeLabel(_ value: String) -> String {
        value.replacingScalars(labelEscapes)
    }

    /// Prometheus' escapes in label values.
    private static let labelEscapes: [Unicode.Scalar: String] = ["\\": "\\\\", "\"": "\\\"", "\n": "\\n"]

    static func escapeHelp(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\n", with: "\\n")
    }
}
