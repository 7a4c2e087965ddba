package deltalog

import "slices"

// Features implied by legacy protocol versions (PROTOCOL.md, "Table Features": a table on
// reader 3 / writer 7 lists explicitly what the older versions implied).
var (
	impliedWriterFeatures = [][]string{
		2: {"appendOnly", "invariants"},
		3: {"appendOnly", "invariants", "checkConstraints"},
		4: {"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns"},
		5: {"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns", "columnMapping"},
		6: {"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns", "columnMapping", "identityColumns"},
	}
	impliedReaderFeatures = [][]string{2: {"columnMapping"}}
)

// readerWriterFeatures are the table features that readers must also support.
var readerWriterFeatures = map[string]bool{
	"columnMapping": true, "timestampNtz": true, "typeWidening": true, "deletionVectors": true,
	"v2Checkpoint": true, "vacuumProtocolCheck": true, "variantType": true,
}

// HasFeature reports whether the protocol supports the named table feature, explicitly
// (reader 3 / writer 7 lists) or implied by a legacy writer version.
func (p Protocol) HasFeature(name string) bool {
	if p.MinWriterVersion >= 7 {
		return slices.Contains(p.WriterFeatures, name)
	}
	w := min(p.MinWriterVersion, len(impliedWriterFeatures)-1)
	return w >= 0 && slices.Contains(impliedWriterFeatures[w], name)
}

// WithFeatures returns a copy of p that also supports the named features, upgraded to
// reader 3 / writer 7 (writer 7 only, for writer-only features) with every feature the
// old versions implied listed explicitly, as PROTOCOL.md requires. Features already
// supported are not added twice; p itself is not modified.
func (p Protocol) WithFeatures(names ...string) Protocol {
	out := Protocol{MinReaderVersion: p.MinReaderVersion, MinWriterVersion: p.MinWriterVersion,
		ReaderFeatures: slices.Clone(p.ReaderFeatures), WriterFeatures: slices.Clone(p.WriterFeatures)}
	var todo []string
	for _, n := range names {
		if !p.HasFeature(n) || (readerWriterFeatures[n] && p.MinReaderVersion >= 3 && !slices.Contains(p.ReaderFeatures, n)) {
			todo = append(todo, n)
		}
	}
	if len(todo) == 0 {
		return out
	}
	if out.MinWriterVersion < 7 {
		w := min(out.MinWriterVersion, len(impliedWriterFeatures)-1)
		if w >= 0 {
			out.WriterFeatures = append(out.WriterFeatures, impliedWriterFeatures[w]...)
		}
		out.MinWriterVersion = 7
	}
	needReader := false
	for _, n := range todo {
		needReader = needReader || readerWriterFeatures[n]
	}
	if needReader && out.MinReaderVersion < 3 {
		r := min(out.MinReaderVersion, len(impliedReaderFeatures)-1)
		if r >= 0 {
			out.ReaderFeatures = append(out.ReaderFeatures, impliedReaderFeatures[r]...)
		}
		out.MinReaderVersion = 3
	}
	for _, n := range todo {
		if !slices.Contains(out.WriterFeatures, n) {
			out.WriterFeatures = append(out.WriterFeatures, n)
		}
		if readerWriterFeatures[n] && out.MinReaderVersion >= 3 && !slices.Contains(out.ReaderFeatures, n) {
			out.ReaderFeatures = append(out.ReaderFeatures, n)
		}
	}
	return out
}
