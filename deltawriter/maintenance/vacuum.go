package maintenance

import (
	"context"
	"errors"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
)

// VacuumOptions configures Vacuum.
type VacuumOptions struct {
	// Retain is how long removed files are kept after their remove (default 168h).
	Retain time.Duration
	// Force allows a Retain shorter than the table's delta.deletedFileRetentionDuration.
	Force bool
	// DryRun lists the files without deleting them.
	DryRun bool
}

// VacuumResult is what Vacuum deleted (or would delete, on a dry run).
type VacuumResult struct {
	Files        []string // store-relative paths
	FilesDeleted int
	BytesDeleted int64
}

// ErrVacuumNotImplemented is the seam's placeholder until VACUUM lands.
var ErrVacuumNotImplemented = errors.New("vacuum: not implemented")

// Vacuum deletes the files of t that no version inside the retention references.
// Placeholder of the issue 16 seam: it returns ErrVacuumNotImplemented.
func Vacuum(ctx context.Context, t *deltawriter.Table, o VacuumOptions) (VacuumResult, error) {
	return VacuumResult{}, ErrVacuumNotImplemented
}
