import Foundation
import NetplayService
import NetplayWire

// TelemetryService: the Prometheus text of every metric it holds.
extension TelemetryService {
    // MARK: Prometheus

    /// A page at least this large is reused for ``largePageSeconds``.
    static let largePageBytes = 1 << 20
    static let largePageSeconds = 1.0

    /// The `/metrics` body, rendered for each scrape; a large page (``largePageBytes``) is
    /// reused for a second: rendering one holds the reactor (ingest, requests) for tens of
    /// milliseconds, and a few clients asking in turn would hold it for good. Connections sent
    /// one page share its bytes.
    func metricsPage() -> [UInt8] {
        if let page = largeMetricsPage, now - page.renderedAt < Self.largePageSeconds { return page.body }
        let body = Array(prometheusText().utf8)
        largeMetricsPage = body.count >= Self.largePageBytes ? (body, now) : nil
        return body
    }

    /// The whole `/metrics` page.
    public func prometheusText() -> String {
        let now = self.now
        var entries: [PrometheusRenderer.Entry] = []
        var synthetic: [Metric] = []
        for instance in store.sortedInstances {
            let labels = [("service", instance.service), ("instance", instance.instance)]
            entries += instance.metrics.map { PrometheusRenderer.Entry(metric: $0, extraLabels: labels) }
            let own = [KeyValue(key: "reporting_service", value: instance.service), KeyValue(key: "reporting_instance", value: instance.instance)]
            synthetic.append(Metric(name: "netplay_instance_last_report_age_seconds", help: "Seconds since the instance's last metric snapshot.",
                                    kind: .gauge, labels: own, value: (now - instance.receivedAt).rounded(toPlaces: 3)))
            synthetic.append(Metric(name: "netplay_instance_reports_total", help: "Metric snapshots received from the instance.",
                                    kind: .counter, labels: own, value: Double(instance.snapshots)))
        }
        entries += retroArch.metrics().map { PrometheusRenderer.Entry(metric: $0, extraLabels: [], authoritative: true) }
        if let runtime {
            let me = [("service", runtime.configuration.kind), ("instance", runtime.configuration.instance)]
            entries += runtime.metrics.metrics().map { PrometheusRenderer.Entry(metric: $0, extraLabels: me, authoritative: true) }
            entries += synthetic.map { PrometheusRenderer.Entry(metric: $0, extraLabels: me, authoritative: true) }
        }
        var conflicts = 0
        let text = PrometheusRenderer.render(entries, conflicts: &conflicts)
        // A gauge of what this page left out (shown on the next page), not a counter: each
        // scrape renders the same conflicts again.
        suppressedSeries = conflicts
        return text
    }
}
