package deltalog

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
)
