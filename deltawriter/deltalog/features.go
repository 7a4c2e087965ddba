package deltalog

// Table feature names, as they appear in protocol.readerFeatures and
// protocol.writerFeatures (PROTOCOL.md, "Table Features" and the section of each
// feature). This is the one list of their spellings; which of them ingestd reads or
// writes is decided in deltawriter (features.go).
const (
	FeatureAppendOnly                  = "appendOnly"
	FeatureInvariants                  = "invariants"
	FeatureCheckConstraints            = "checkConstraints"
	FeatureChangeDataFeed              = "changeDataFeed"
	FeatureGeneratedColumns            = "generatedColumns"
	FeatureColumnMapping               = "columnMapping"
	FeatureIdentityColumns             = "identityColumns"
	FeatureAllowColumnDefaults         = "allowColumnDefaults"
	FeatureDeletionVectors             = "deletionVectors"
	FeatureTimestampNtz                = "timestampNtz"
	FeatureTypeWidening                = "typeWidening"
	FeatureTypeWideningPreview         = "typeWidening-preview"
	FeatureV2Checkpoint                = "v2Checkpoint"
	FeatureVacuumProtocolCheck         = "vacuumProtocolCheck"
	FeatureVariantType                 = "variantType"
	FeatureVariantTypePreview          = "variantType-preview"
	FeatureGeospatial                  = "geospatial"
	FeatureDomainMetadata              = "domainMetadata"
	FeatureCatalogManaged              = "catalogManaged"
	FeatureCatalogOwnedPreview         = "catalogOwned-preview"
	FeatureMaterializePartitionColumns = "materializePartitionColumns"
)
