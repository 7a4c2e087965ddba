package deltalog

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Table property keys (metaData.configuration) this module reads or writes
// (PROTOCOL.md, "Table Features", the section of each feature, and Delta's DeltaConfig).
// Boolean properties hold "true" or "false"; durations hold "interval <n> <unit>".
const (
	PropColumnMappingMode        = "delta.columnMapping.mode"        // none, name or id ("Column Mapping")
	PropColumnMappingMaxColumnID = "delta.columnMapping.maxColumnId" // largest column mapping id in use
	PropEnableTypeWidening       = "delta.enableTypeWidening"        // needs FeatureTypeWidening ("Type Widening")
	PropCheckpointInterval       = "delta.checkpointInterval"        // commits between checkpoints (default 10)
	// PropLegacyTimestampZone is ingestd's own table property: the IANA zone in which
	// legacy zone-less timestamp partition values ("2024-06-15 19:30:45", written by Spark
	// before Delta 3.3 in its session zone) are read; UTC when unset (docs/tables.md,
	// "Partitioned tables").
	PropLegacyTimestampZone      = "ingestd.partition.legacyTimestampZone"
	PropCompressionCodec         = "delta.parquet.compression.codec"
	PropNumIndexedCols           = "delta.dataSkippingNumIndexedCols"
	PropStatsColumns             = "delta.dataSkippingStatsColumns"
	PropStringPrefixLength       = "delta.dataSkippingStringPrefixLength"
	PropAppendOnly               = "delta.appendOnly"
	PropConstraintPrefix         = "delta.constraints." // + name: a CHECK constraint's SQL expression
	PropTxnRetentionDuration     = "delta.setTransactionRetentionDuration"
	PropDeletedFileRetention     = "delta.deletedFileRetentionDuration"
	PropLogRetentionDuration     = "delta.logRetentionDuration"
	PropEnableExpiredLogCleanup  = "delta.enableExpiredLogCleanup"
	PropEnableDeletionVectors    = "delta.enableDeletionVectors"
	PropEnableRowTracking        = "delta.enableRowTracking"
	PropEnableInCommitTimestamps = "delta.enableInCommitTimestamps"
	PropEnableChangeDataFeed     = "delta.enableChangeDataFeed"
	PropCheckpointStatsAsJSON    = "delta.checkpoint.writeStatsAsJson"
	PropCheckpointStatsAsStruct  = "delta.checkpoint.writeStatsAsStruct"
	PropRandomizeFilePrefixes    = "delta.randomizeFilePrefixes"
	// PropGenerationTimeZone is ingestd's own table property (not Delta's): the IANA time
	// zone generation expressions are evaluated in (Spark's session zone); UTC when absent
	// (docs/tables.md, "Generated columns").
	PropGenerationTimeZone = "ingestd.generation.timeZone"
	// PropFeaturePrefix + a feature name set to "supported" asks for the feature
	// ("Table Features", "Enabling a table feature").
	PropFeaturePrefix = "delta.feature."
)

// Field metadata keys (StructField.Metadata) besides the column mapping ones.
const (
	// MetaTypeChanges records the history of a field's type under type widening
	// (PROTOCOL.md, "Type Widening"): an array of {"fromType", "toType"[, "fieldPath"]}
	// objects, oldest first.
	MetaTypeChanges          = "delta.typeChanges"
	MetaInvariants           = "delta.invariants"           // "Column Invariants"
	MetaGenerationExpression = "delta.generationExpression" // "Generated Columns"
	MetaIdentityPrefix       = "delta.identity."            // "Identity Columns": start, step, highWaterMark, allowExplicitInsert
	MetaCurrentDefault       = "CURRENT_DEFAULT"            // "Default Columns"
	// MetaCharVarcharType is Spark's record of a CHAR(n) or VARCHAR(n) column stored as
	// string: the column's declared type as Spark's catalog string ("char(3)",
	// "varchar(5)", "array<varchar(4)>", "map<string,varchar(5)>"). Delta enforces the
	// length on every write (error class DELTA_EXCEED_CHAR_VARCHAR_LIMIT); a struct's own
	// fields carry their own.
	MetaCharVarcharType = "__CHAR_VARCHAR_TYPE_STRING"
)

// GenerationTimeZone returns the session time zone generation expressions are evaluated
// in: the IANA zone of the table property ingestd.generation.timeZone
// (PropGenerationTimeZone) of conf (metaData.configuration), UTC when it is absent. Delta
// has no such property: Spark evaluates generation expressions in the writing session's
// zone (spark.sql.session.timeZone), so the same row gets another date in another
// session; ingestd fixes it per table (docs/tables.md, "Generated columns"). An empty
// value, "Local" or a name the zone database does not know is an error naming the
// property.
func GenerationTimeZone(conf map[string]string) (*time.Location, error) {
	name, ok := conf[PropGenerationTimeZone]
	if !ok {
		return time.UTC, nil
	}
	if name == "" || strings.EqualFold(name, "Local") {
		return nil, fmt.Errorf("read table property %s=%q: want an IANA time zone name such as UTC or Australia/Melbourne", PropGenerationTimeZone, name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("read table property %s=%q: not a known IANA time zone (want a name such as UTC or Australia/Melbourne): %w", PropGenerationTimeZone, name, err)
	}
	return loc, nil
}

// ErrPartitionType is returned for a partition column whose type cannot be a partition
// column ingestd writes: a nested type, or binary (Spark passes raw bytes into the JSON
// log, which is invalid for non-UTF-8 values, so ingestd refuses it; docs/tables.md,
// "Partitioned tables").
var ErrPartitionType = errors.New("unsupported partition column type")
