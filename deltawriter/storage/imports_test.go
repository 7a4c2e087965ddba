package storage

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Only deltawriter/storage may import the cloud SDKs (DESIGN.md §2): the rest of ingestd
// sees the Store interface. The one other is internal/awscred, the AWS credential chain
// for the AWS_MSK_IAM SASL mechanism (not a store), and it may import only the AWS SDK.
func TestOnlyStorageImportsCloudSDKs(t *testing.T) {
	sdk := []string{"github.com/aws/", "cloud.google.com/go/", "google.golang.org/api/", "github.com/Azure/", "golang.org/x/oauth2"}
	root, _ := filepath.Abs("../..")
	self, _ := filepath.Abs(".")
	awscred := filepath.Join(root, "internal", "awscred")
	checked := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || filepath.Dir(p) == self {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			for _, s := range sdk {
				if filepath.Dir(p) == awscred && s == "github.com/aws/" {
					continue
				}
				if strings.HasPrefix(path, s) {
					rel, _ := filepath.Rel(root, p)
					t.Errorf("%s imports %s: only deltawriter/storage may import cloud SDKs", rel, path)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked only %d files under %s", checked, root)
	}
}
