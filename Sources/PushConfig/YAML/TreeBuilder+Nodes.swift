import CYAML
import PushSystem
#if canImport(Glibc)
import Glibc
#endif

/// Collections opened and closed, aliases and merges: the tree as libyaml's events build it.
extension TreeBuilder {
    /// Starts a mapping or sequence, enforcing the depth limit.
    mutating func open(
        _ kind: Frame.Kind, tag: UnsafeMutablePointer<yaml_char_t>?,
        anchor: UnsafeMutablePointer<yaml_char_t>?, event: UnsafePointer<yaml_event_t>
    ) -> Bool {
        let start = tag == nil && anchor == nil
            ? position(event.pointee.start_mark)
            : textStart(from: event.pointee.start_mark, before: nil)
        let depth = stack.count
        if depth == 0 {
            splittable = splittable && kind == .mapping && event.pointee.start_mark.column == 0
                && event.pointee.data.mapping_start.style == YAML_BLOCK_MAPPING_STYLE
        }
        guard depth < YAMLParser.maximumDepth else {
            fail(YAMLError(message: "nesting is deeper than \(YAMLParser.maximumDepth) levels", position: start))
            return false
        }
        nodeCount += 1
        let anchorName = anchor.map { String(cString: $0) }
        if let anchorName {
            if section != nil {
                sectionUnusable = true
                return false
            }
            // An alias inside this collection must not resolve to an older node of the same
            // name: it would refer to this unfinished one, which is reported as recursive.
            anchors[anchorName] = nil
        }
        if depth == itemBuffers.count {
            itemBuffers.append(ScratchBuffer())
            entryBuffers.append(ScratchBuffer())
        }
        var frame = Frame(kind: kind, tag: tag.map { String(cString: $0) }, anchor: anchorName, start: start)
        if section == nil, let stream, kind == .sequence, depth == 1, tag == nil, anchorName == nil, documentCount == 1,
           stack[0].kind == .mapping, stack[0].tag == nil, stack[0].merges.isEmpty, stack[0].anchor == nil,
           stack[0].pendingKey?.value == stream.key, stack[0].pendingKey?.tag == nil {
            let entries = entryBuffers[0]
            // A second `accounts:` is dropped as a duplicate: only the first is streamed.
            if !(0..<entries.count).contains(where: { entries.base[$0].key.value == stream.key }) {
                frame.streams = true
                streamedItemCount = 0
                let section = splittable && event.pointee.data.sequence_start.style == YAML_BLOCK_SEQUENCE_STYLE
                    ? feed?.plan(column: event.pointee.start_mark.column, key: stream.key) : nil
                stream.begin(before: (0..<entries.count).map { entries.base[$0] }, section: section)
            }
        }
        if let section, depth == 1 {
            // The second part of a split file: its text starts with the sequence.
            guard kind == .sequence, tag == nil, stack[0].pendingKey?.value == section.key,
                  event.pointee.start_mark.column == section.column, event.pointee.start_mark.line == 1,
                  event.pointee.data.sequence_start.style == YAML_BLOCK_SEQUENCE_STYLE else {
                sectionUnusable = true
                return false
            }
            frame.streams = true
            streamedItemCount = 0
        }
        stack.append(frame)
        return true
    }

    /// Finishes the innermost collection and attaches it to its parent; false when parsing
    /// should stop.
    mutating func close(_ event: UnsafePointer<yaml_event_t>) -> Bool {
        guard var frame = stack.popLast() else { return true }
        let depth = stack.count
        let node: YAMLNode
        switch frame.kind {
        case .sequence:
            if frame.streams {
                if section != nil {
                    // The second part ends with its sequence: the rest is the first part's.
                    sectionEnd = (event.pointee.start_mark, frame.size - 1)
                    return false
                }
                if let jump = feed?.jump {
                    // The sequence must end after the jump, or the second part was not its.
                    guard event.pointee.start_mark.index >= jump.characterIndex else {
                        splitFailed = true
                        return false
                    }
                    spliced = true
                    streamedItemCount! += jump.itemCount
                    // After the first part's, before what follows the sequence: where one parse
                    // finds them.
                    errors += jump.errors
                    nodeCount += jump.nodeCount
                    frame.size += jump.nodeCount
                    lineShiftFrom = jump.characterIndex
                    lineShift = jump.lineShift
                    stream?.end(spliced: true)
                } else {
                    // The split line, if any, is past the sequence.
                    feed?.cancel()
                    stream?.end()
                }
            }
            node = .sequence(YAMLSequence(items: itemBuffers[depth].takeAll(), tag: frame.tag, start: frame.start))
        case .mapping:
            var entries = entryBuffers[depth].takeAll()
            if !frame.merges.isEmpty { errors += applyMerges(frame.merges, to: &entries) }
            node = .mapping(YAMLMapping(entries: entries, tag: frame.tag, start: frame.start))
        }
        if let anchor = frame.anchor { anchors[anchor] = Anchored(node: node, size: frame.size) }
        attach(node, size: frame.size)
        return true
    }

    /// Expands an alias to a copy of its anchored node, enforcing the node budget.
    mutating func alias(_ name: String, at position: SourcePosition) -> Bool {
        guard let anchored = anchors[name] else {
            let message = stack.contains(where: { $0.anchor == name })
                ? "the alias '*\(name)' refers to a node that contains it"
                : "the alias '*\(name)' does not refer to an earlier anchor '&\(name)'"
            fail(YAMLError(message: message, position: position))
            return false
        }
        nodeCount += anchored.size
        guard nodeCount <= YAMLParser.maximumNodeCount else {
            fail(YAMLError(message: "aliases expand to more than \(YAMLParser.maximumNodeCount) nodes",
                           position: position))
            return false
        }
        attach(anchored.node, size: anchored.size)
        return true
    }

    /// `attach` for a scalar, the hot path: a key is stored as is, without wrapping it in a node.
    mutating func attachScalar(_ scalar: consuming YAMLScalar) {
        let top = stack.count - 1
        if top >= 0, stack[top].expectsKey {
            stack[top].size += 1
            stack[top].expectsKey = false
            stack[top].pendingKey = scalar
        } else {
            attach(.scalar(scalar), size: 1)
        }
    }

    /// Attaches a finished node (`size` nodes in all) to the innermost open collection, or
    /// makes it the root.
    mutating func attach(_ node: consuming YAMLNode, size: Int) {
        let top = stack.count - 1
        guard top >= 0 else {
            root = node
            return
        }
        stack[top].size += size
        switch stack[top].kind {
        case .sequence:
            if stack[top].streams {
                // Handed over, not kept: the loader drops each item once read, so a file of
                // 100,000 accounts never holds them all twice.
                streamedItemCount! += 1
                stream?.add(node)
            } else {
                itemBuffers[top].append(node)
            }
        case .mapping:
            if let key = stack[top].pendingKey.take() {
                stack[top].expectsKey = true
                addEntry(key: key, value: node, depth: top)
            } else if stack[top].skipsValue {
                stack[top].skipsValue = false
                stack[top].expectsKey = true
            } else if case .scalar(let key) = node {
                stack[top].expectsKey = false
                stack[top].pendingKey = key
            } else {
                stack[top].expectsKey = false
                stack[top].skipsValue = true
                errors.append(YAMLError(message: "a mapping key must be a plain value", position: node.start))
            }
        }
    }

    /// Adds an entry to the mapping at `depth`, or records a merge; reports a duplicate key
    /// (keeping the first).
    mutating func addEntry(key: consuming YAMLScalar, value: consuming YAMLNode, depth: Int) {
        if key.style == .plain, key.value == "<<", key.tag == nil || key.tag == "tag:yaml.org,2002:merge" {
            stack[depth].merges.append(Merge(source: value, keyPosition: key.start, index: entryBuffers[depth].count))
            return
        }
        // Read keys in place through the pointer: iterating entries would copy each one.
        let existing = entryBuffers[depth].base
        let count = entryBuffers[depth].count
        var duplicateIndex: Int?
        if count < Frame.linearScanLimit {
            // Lengths first: keys of one mapping mostly differ in length, and comparing two
            // different strings costs a call each (a tenth of building an account's mapping).
            let length = key.value.utf8.count
            for index in 0..<count where existing[index].key.value.utf8.count == length && existing[index].key.value == key.value {
                duplicateIndex = index
                break
            }
        } else {
            if stack[depth].keySet.isEmpty {
                stack[depth].keySet.reserveCapacity(count * 2)
                for index in 0..<count { stack[depth].keySet.insert(existing[index].key.value) }
            }
            if !stack[depth].keySet.insert(key.value).inserted {
                duplicateIndex = (0..<count).first { existing[$0].key.value == key.value }
            }
        }
        if let duplicateIndex {
            let first = existing[duplicateIndex].key
            errors.append(YAMLError(message: "duplicate key '\(key.value)' (first at line \(first.start.line))",
                                    position: key.start))
            return
        }
        entryBuffers[depth].append(Entry(key: key, value: value))
    }

    /// Merges the entries of the `<<` sources into `entries` where their keys are not already
    /// present: explicit keys win, then earlier sources over later ones. Merged entries take
    /// the place of their `<<` entry. Returns errors for sources that are not mappings.
    func applyMerges(_ merges: [Merge], to entries: inout [Entry]) -> [YAMLError] {
        var errors: [YAMLError] = []
        var present = Set<String>(minimumCapacity: entries.count * 2)
        for entry in entries { present.insert(entry.key.value) }
        var merged: [Entry] = []
        merged.reserveCapacity(entries.count)
        var nextExplicit = 0

        func take(_ mapping: YAMLMapping) {
            for entry in mapping.entries where present.insert(entry.key.value).inserted {
                merged.append(entry)
            }
        }

        for merge in merges {
            merged.append(contentsOf: entries[nextExplicit..<merge.index])
            nextExplicit = merge.index
            switch merge.source {
            case .mapping(let mapping):
                take(mapping)
            case .sequence(let sequence):
                for item in sequence.items {
                    if case .mapping(let mapping) = item {
                        take(mapping)
                    } else {
                        errors.append(YAMLError(
                            message: "the merge key '<<' can only merge mappings, but its list holds \(item.kindDescription)",
                            position: merge.keyPosition))
                    }
                }
            case .scalar:
                errors.append(YAMLError(
                    message: "the value of the merge key '<<' must be a mapping or a list of mappings",
                    position: merge.keyPosition))
            }
        }
        merged.append(contentsOf: entries[nextExplicit...])
        entries = merged
        return errors
    }
}
