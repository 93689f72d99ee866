/// Shell variable names, for secrets that `preview --format curl` shows as `"$NAME"`.
public enum ShellVariable {
    /// True for `[A-Za-z_][A-Za-z0-9_]*`: a name a shell expands whole in `"$NAME"`.
    public static func isName(_ name: String) -> Bool {
        guard let first = name.utf8.first, !(0x30...0x39).contains(first) else { return false }
        return name.utf8.allSatisfy { ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F }
    }

    /// A name made from `text`: `db-pass.txt` → `DB_PASS_TXT`.
    static func name(from text: String) -> String {
        let mapped = text.uppercased().unicodeScalars.map { ($0 >= "A" && $0 <= "Z") || ($0 >= "0" && $0 <= "9") ? Character($0) : "_" }
        let name = String(mapped)
        return name.first?.isNumber == true ? "_" + name : name
    }

    /// `name` as it is when a shell can expand it, else a name made from it (an `!env` name
    /// such as `demo-pass` is a valid environment variable no shell can expand).
    static func name(keeping name: String) -> String {
        isName(name) ? name : self.name(from: name)
    }
}
