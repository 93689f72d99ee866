import Foundation

/// The key order JSONSerialization forgets: a scan of JSON text for the keys of its outermost objects.
enum JSONObjectKeys {
    /// The keys, in the order written and with repeats kept, of the top-level object, or of each
    /// object directly inside a top-level array; `[]` for other JSON. `bytes` should be valid JSON
    /// (check it with JSONSerialization first); what this returns for other text is unspecified.
    static func outermost(in bytes: [UInt8]) -> [[String]] {
        /// An open `{` or `[`; `list` is where an outermost object's keys go.
        struct Container {
            var isObject: Bool
            var list: Int?
        }
        var lists: [[String]] = []
        var open: [Container] = []
        var expectingKey = false
        var index = 0
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "{"):
                let outermost = open.isEmpty || (open.count == 1 && !open[0].isObject)
                if outermost { lists.append([]) }
                open.append(Container(isObject: true, list: outermost ? lists.count - 1 : nil))
                expectingKey = true
            case UInt8(ascii: "["):
                open.append(Container(isObject: false))
                expectingKey = false
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                _ = open.popLast()
                expectingKey = false
            case UInt8(ascii: ","):
                expectingKey = open.last?.isObject ?? false
            case UInt8(ascii: ":"):
                expectingKey = false
            case UInt8(ascii: "\""):
                let start = index
                index += 1
                while index < bytes.count && bytes[index] != UInt8(ascii: "\"") {
                    index += bytes[index] == UInt8(ascii: "\\") ? 2 : 1
                }
                if expectingKey, let list = open.last?.list, index < bytes.count,
                   let key = try? JSONSerialization.jsonObject(with: Data(bytes[start...index]), options: .fragmentsAllowed) as? String {
                    lists[list].append(key)
                }
                expectingKey = false
            default:
                break
            }
            index += 1
        }
        return lists
    }
}
