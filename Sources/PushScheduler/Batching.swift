/// How the reports of one backend go out together: as one request of up to `limit` reports.
///
/// Given to ``ReportScheduler/submit(_:host:after:batch:hold:)``. When a report submitted with a
/// `Batching` whose `limit` is above 1 starts, other reports submitted with an equal `Batching`
/// (the same `group` *and* `limit`) that are due by then join it, earliest due first, up to
/// `limit` reports in all, and the batch is handed to `performBatch` as one call. A `limit` of 1
/// or less means no batching: the report goes out alone, exactly as without a `Batching`.
public struct Batching: Sendable, Hashable {
    /// What the reports have in common, e.g. the backend's service name; only equal groups mix.
    public var group: String
    /// The most reports in one batch, the first included (the backend's own limit).
    public var limit: Int

    /// A batching of `group`, at most `limit` reports a request.
    public init(group: String, limit: Int) {
        self.group = group
        self.limit = limit
    }

    /// Whether reports join others at all (a `limit` above 1).
    var isBatched: Bool { limit > 1 }
}
