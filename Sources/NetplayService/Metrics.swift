import Foundation
import NetplayWire

/// The metrics of one service instance, turned into a `MetricsSnapshot` for telemetry.
///
/// Confined to the reactor thread like the sockets (not `Sendable`). Asking twice for the same
/// name and labels returns the same instrument. Names follow Prometheus conventions (prefix
/// `netplay_`, base units, `_total` for counters); telemetry adds the service and instance labels.
public final class MetricsRegistry {
    private var counters: [String: Counter] = [:]
    private var gauges: [String: Gauge] = [:]
    private var histograms: [String: Histogram] = [:]
    private var computed: [(key: String, metric: () -> Metric)] = []

    /// Creates an empty registry.
    public init() {}

    private static func key(_ name: String, _ labels: [String: String]) -> String {
        name + "{" + labels.keys.sorted().map { "\($0)=\(labels[$0]!)" }.joined(separator: ",") + "}"
    }

    /// The counter `name` with `labels`, created on first use.
    public func counter(_ name: String, help: String, labels: [String: String] = [:]) -> Counter {
        Self.instrument(in: &counters, name, labels) { Counter(name: name, help: help, labels: labels) }
    }

    /// The gauge `name` with `labels`, created on first use.
    public func gauge(_ name: String, help: String, labels: [String: String] = [:]) -> Gauge {
        Self.instrument(in: &gauges, name, labels) { Gauge(name: name, help: help, labels: labels) }
    }

    /// The instrument `name` with `labels` in `table`, made by `make` and kept on first use.
    private static func instrument<Instrument>(in table: inout [String: Instrument], _ name: String,
                                               _ labels: [String: String], make: () -> Instrument) -> Instrument {
        let key = Self.key(name, labels)
        if let existing = table[key] { return existing }
        let instrument = make()
        table[key] = instrument
        return instrument
    }

    /// A gauge whose value is read from `value` at each snapshot.
    public func gauge(_ name: String, help: String, labels: [String: String] = [:], value: @escaping () -> Double) {
        let key = Self.key(name, labels)
        computed.removeAll { $0.key == key }
        computed.append((key, {
            Metric(name: name, help: help, kind: .gauge, labels: labels.keyValues, value: value())
        }))
    }

    /// A counter whose total is read from `value` at each snapshot (a count kept elsewhere, which
    /// only grows).
    public func counter(_ name: String, help: String, labels: [String: String] = [:], value: @escaping () -> Double) {
        let key = Self.key(name, labels)
        computed.removeAll { $0.key == key }
        computed.append((key, {
            Metric(name: name, help: help, kind: .counter, labels: labels.keyValues, value: value())
        }))
    }

    /// The histogram `name` with `labels` and upper `buckets` (ascending), created on first use.
    public func histogram(_ name: String, help: String, buckets: [Double], labels: [String: String] = [:]) -> Histogram {
        Self.instrument(in: &histograms, name, labels) { Histogram(name: name, help: help, buckets: buckets, labels: labels) }
    }

    /// Every metric, sorted by name and labels.
    public func metrics() -> [Metric] {
        var all: [(String, Metric)] = []
        all += counters.map { ($0.key, $0.value.metric) }
        all += gauges.map { ($0.key, $0.value.metric) }
        all += histograms.map { ($0.key, $0.value.metric) }
        all += computed.map { ($0.key, $0.metric()) }
        return all.sorted { $0.0 < $1.0 }.map(\.1)
    }

    /// A snapshot ready to push to telemetry.
    public func snapshot(service: String, instance: String, sequence: UInt64) -> MetricsSnapshot {
        MetricsSnapshot(service: service, instance: instance, timestampUnixMs: UnixTime.nowMs(),
                        metrics: metrics(), sequence: sequence)
    }
}

/// A monotonically increasing total.
public final class Counter {
    let name: String, help: String, labels: [String: String]
    /// The current total.
    public private(set) var value: Double = 0

    init(name: String, help: String, labels: [String: String]) {
        self.name = name; self.help = help; self.labels = labels
    }

    /// Adds `amount` (negative amounts are ignored: counters never go down).
    public func increment(by amount: Double = 1) {
        if amount > 0 { value += amount }
    }

    var metric: Metric { Metric(name: name, help: help, kind: .counter, labels: labels.keyValues, value: value) }
}

/// A level that goes up and down.
public final class Gauge {
    let name: String, help: String, labels: [String: String]
    /// The current level.
    public private(set) var value: Double = 0

    init(name: String, help: String, labels: [String: String]) {
        self.name = name; self.help = help; self.labels = labels
    }

    /// Sets the level.
    public func set(_ newValue: Double) { value = newValue }
    /// Moves the level by `delta`.
    public func add(_ delta: Double) { value += delta }

    var metric: Metric { Metric(name: name, help: help, kind: .gauge, labels: labels.keyValues, value: value) }
}

/// A distribution of observations in fixed buckets (Prometheus cumulative semantics).
public final class Histogram {
    let name: String, help: String, labels: [String: String]
    /// Upper bounds, ascending.
    public let bounds: [Double]
    private var bucketCounts: [UInt64]
    /// Sum of all observations.
    public private(set) var sum: Double = 0
    /// Number of observations.
    public private(set) var count: UInt64 = 0

    init(name: String, help: String, buckets: [Double], labels: [String: String]) {
        self.name = name; self.help = help; self.labels = labels
        bounds = buckets.sorted()
        bucketCounts = Array(repeating: 0, count: bounds.count)
    }

    /// Records one observation.
    public func observe(_ value: Double) {
        sum += value
        count += 1
        // Non-cumulative per bucket here; made cumulative in `metric`.
        var low = 0, high = bounds.count
        while low < high {
            let mid = (low + high) / 2
            if bounds[mid] < value { low = mid + 1 } else { high = mid }
        }
        if low < bounds.count { bucketCounts[low] += 1 }
    }

    /// Cumulative counts per bound: observations ≤ bound.
    public var cumulativeCounts: [UInt64] {
        var running: UInt64 = 0
        return bucketCounts.map { running += $0; return running }
    }

    var metric: Metric {
        Metric(name: name, help: help, kind: .histogram, labels: labels.keyValues,
               bucketBounds: bounds, bucketCounts: cumulativeCounts, sum: sum, count: count)
    }

    /// Latency buckets in seconds from 50 µs to 2.5 s.
    public static let latencySeconds: [Double] = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                  0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]
}

extension Dictionary where Key == String, Value == String {
    /// Labels as sorted key/value pairs for the wire.
    var keyValues: [KeyValue] { keys.sorted().map { KeyValue(key: $0, value: self[$0]!) } }
}
