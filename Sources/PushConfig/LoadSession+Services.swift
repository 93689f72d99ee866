import Dispatch
import PushTemplates
import PushSystem
#if canImport(Glibc)
import Glibc
#endif

/// `globals:` (usable as `%name%` in every template) and `services:` (kept for their backends).
extension LoadSession {
    mutating func loadGlobals(_ node: YAMLNode, file: String) {
        guard let mapping = mapping(node, file: file, what: "globals") else { return }
        let reserved = Set(DeviceValues.names + BuiltinVariable.allCases.map(\.rawValue) + ["account"])
        for pair in mapping.entries {
            let (key, value) = (pair.key, pair.value)
            let name = key.value
            guard Template.isVariableName(name) else {
                diagnostics.error("global '\(name)' cannot be used as %\(name)%: a name is letters, digits and '_', not starting with a digit",
                                  file: file, at: key.start)
                continue
            }
            if reserved.contains(name) {
                diagnostics.error("global '\(name)' would hide the built-in variable of that name", file: file, at: key.start)
                continue
            }
            if let existing = configuration.globals[name].map({ ($0.origin.file, $0.origin.position.line) })
                ?? unreadableGlobalPlaces[name] {
                diagnostics.error("global '\(name)' is already set at \(existing.0):\(existing.1)", file: file, at: key.start)
                continue
            }
            guard case .scalar(let scalar) = value else {
                diagnostics.error("global '\(name)' must be a single value, not \(value.kindDescription)", file: file, at: value.start)
                continue
            }
            if let resolved = resolve(scalar, key: name, file: file, account: nil) {
                configuration.globals[name] = resolved
            } else {
                configuration.unreadableGlobals.insert(name)
                unreadableGlobalPlaces[name] = (file, key.start.line)
            }
        }
    }

    mutating func loadServices(_ node: YAMLNode, file: String) {
        guard let mapping = mapping(node, file: file, what: "services") else { return }
        for pair in mapping.entries {
            let (key, value) = (pair.key, pair.value)
            let name = key.value
            if let existing = configuration.services[name] {
                diagnostics.error("service '\(name)' is already declared at \(existing.file):\(existing.position.line)", file: file, at: key.start)
                continue
            }
            guard let entry = self.mapping(value, file: file, what: "service '\(name)'") else { continue }
            var settings: [String: ConfigValue] = [:]
            var mappings: [String: [(key: String, value: ConfigValue)]] = [:]
            var keyPositions: [String: SourcePosition] = [:]
            var typeName: String?
            var typePosition: SourcePosition?
            for pair in entry.entries {
                let (settingKey, settingValue) = (pair.key, pair.value)
                keyPositions[settingKey.value] = settingKey.start
                if settingKey.value != "type", case .mapping(let inner) = settingValue {
                    // A mapping of single values (a callback's headers): kept in file order.
                    var items: [(key: String, value: ConfigValue)] = []
                    for item in inner.entries {
                        guard case .scalar(let scalar) = item.value else {
                            diagnostics.error("'\(settingKey.value).\(item.key.value)' must be a single value, not \(item.value.kindDescription)",
                                              file: file, at: item.value.start)
                            continue
                        }
                        if let resolved = resolve(scalar, key: item.key.value, file: file, account: nil) {
                            items.append((item.key.value, resolved))
                        }
                    }
                    mappings[settingKey.value] = items
                    continue
                }
                guard case .scalar(let scalar) = settingValue else {
                    diagnostics.error("service setting '\(settingKey.value)' must be a single value, not \(settingValue.kindDescription)",
                                      file: file, at: settingValue.start)
                    continue
                }
                if settingKey.value == "type" {
                    // Which types there are is the backends' to say.
                    typeName = scalar.value
                    typePosition = scalar.start
                } else if let resolved = resolve(scalar, key: settingKey.value, file: file, account: nil) {
                    settings[settingKey.value] = resolved
                }
            }
            guard let typeName else {
                diagnostics.error("service '\(name)' needs a type", file: file, at: key.start)
                continue
            }
            configuration.services[name] = ServiceDefinition(name: name, type: typeName, settings: settings, mappings: mappings,
                                                             keyPositions: keyPositions, file: file, position: key.start,
                                                             typePosition: typePosition)
        }
    }
}
