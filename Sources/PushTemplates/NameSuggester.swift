/// Finds the known name nearest to a misspelt one, for "did you mean" hints.
public enum NameSuggester {
    /// The candidate closest to `name` by edit distance (case differences are free), or nil when
    /// none is within `maxDistance` edits (default: a third of the name's length, at least 2).
    public static func nearest<S: Sequence>(to name: String, among candidates: S, maxDistance: Int? = nil) -> String?
    where S.Element == String {
        let target = Array(name.lowercased().unicodeScalars)
        let limit = maxDistance ?? max(2, target.count / 3)
        var best: (name: String, distance: Int)?
        for candidate in candidates where candidate != name {
            let lowered = Array(candidate.lowercased().unicodeScalars)
            if abs(lowered.count - target.count) > limit { continue }
            let d = distance(target, lowered, limit: limit)
            if d <= limit, best == nil || d < best!.distance || (d == best!.distance && candidate < best!.name) {
                best = (candidate, d)
            }
        }
        return best?.name
    }

    /// Levenshtein distance with an early exit once every cell of a row exceeds `limit`.
    static func distance(_ a: [Unicode.Scalar], _ b: [Unicode.Scalar], limit: Int) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            var rowMin = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                rowMin = min(rowMin, current[j])
            }
            if rowMin > limit { return rowMin }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}
