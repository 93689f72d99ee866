/// The version pushreporter reports in `User-Agent` and `%version%`.
public enum PushReporterVersion {
    public static let current = "0.1.0"

    /// The `User-Agent` of every request (SPEC §4).
    public static let userAgent = "pushreporter/\(current)"
}
