import PushTemplates

/// Shell variable names, for secrets that `preview --format curl` shows as `"$NAME"`.
public enum ShellVariable {
    /// A name made from `text`: `db-pass.txt` → `DB_PASS_TXT`.
    static func name(from text: String) -> String {
        let mapped = text.uppercased().unicodeScalars.map { ($0 >= "A" && $0 <= "Z") || ($0 >= "0" && $0 <= "9") ? Character($0) : "_" }
        let name = String(mapped)
        return name.first?.isNumber == true ? "_" + name : name
    }

    /// `name` as it is when a shell can expand it whole in `"$NAME"` (`[A-Za-z_][A-Za-z0-9_]*`,
    /// the names `%name%` takes too), else a name made from it (an `!env` name such as
    /// `demo-pass` is a valid environment variable no shell can expand).
    static func name(keeping name: String) -> String {
        Template.isVariableName(name) ? name : self.name(from: name)
    }
}
