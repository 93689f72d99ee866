import PushConfig
import PushTemplates

extension ServiceValues {
    /// Reports each per-account key that is not one of `known` (SPEC §9.0): an error at the key,
    /// naming what the backend `type` takes, with a did-you-mean. True when every key is known.
    public func checkKeys(_ known: [String], service: String, type: String, account: String,
                          diagnostics: inout DiagnosticList) -> Bool {
        var allKnown = true
        for key in values.keys.sorted() where !known.contains(key) {
            var message = "unknown key '\(key)' for the service '\(service)' (\(type) takes \(known.joined(separator: ", ")))"
            if let nearest = NameSuggester.nearest(to: key, among: known) { message += "; did you mean '\(nearest)'?" }
            diagnostics.error(message, file: file, at: keyPositions[key] ?? position, account: account)
            allKnown = false
        }
        return allKnown
    }
}
