/// Whether a URL's host is a loopback address as libcurl reads it
/// (``CurlTransfer/isLoopbackURL(_:)``), remembered for the last URL's `scheme://authority`.
///
/// It is asked for every request, on the transport thread, to keep requests to this machine
/// away from a proxy; libcurl's URL parser behind it cost a parse, a copy of the host and a split
/// of it for each. Requests to one receiver share their authority, and the authority (everything
/// from the scheme to the first `/`, `?` or `#` after `://`) decides the host, so a URL whose
/// authority is byte for byte the last one's gets the last answer. Used by one thread only.
struct LoopbackCache {
    private var authority: [UInt8] = []
    private var answer = false

    mutating func isLoopback(_ url: String) -> Bool {
        var text = url
        return text.withUTF8 { bytes in
            guard let end = Self.authorityEnd(of: bytes) else {
                return CurlTransfer.isLoopbackURL(url)
            }
            let current = UnsafeBufferPointer(rebasing: bytes[..<end])
            if !authority.isEmpty, authority.count == current.count, authority.elementsEqual(current) {
                return answer
            }
            answer = CurlTransfer.isLoopbackURL(url)
            authority = Array(current)
            return answer
        }
    }

    /// Where the authority of `bytes` ends (the first `/`, `?` or `#` after `://`, or the end);
    /// nil without `://`.
    static func authorityEnd(of bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon + 2 < bytes.count,
              bytes[colon + 1] == UInt8(ascii: "/"), bytes[colon + 2] == UInt8(ascii: "/") else { return nil }
        var end = colon + 3
        while end < bytes.count, bytes[end] != UInt8(ascii: "/"), bytes[end] != UInt8(ascii: "?"), bytes[end] != UInt8(ascii: "#") {
            end += 1
        }
        return end
    }
}
