package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/vfleet/vfleet/internal/regfile"
)

// maxIndexBytes bounds an OCI layout's index.json, the one file read
// whole before any descriptor gives a size: it lists a few manifests.
const maxIndexBytes = 4 << 20

// layoutFiles opens the files of an OCI image layout by their names in
// it: a directory's, or an OCI archive's members, read where they lie in
// the archive, so that an archive is never extracted.
type layoutFiles interface {
	open(name string) (io.ReadCloser, error)
}

// dirFiles are a layout directory's files.
type dirFiles string

func (d dirFiles) open(name string) (io.ReadCloser, error) {
	return os.Open(filepath.Join(string(d), filepath.FromSlash(name)))
}

// tarMember is where a regular file's bytes lie in a tar archive.
type tarMember struct {
	offset, size int64
	regular      bool
}

// tarFiles are an OCI archive's members.
type tarFiles struct {
	path    string
	members map[string]tarMember
}

func (t tarFiles) open(name string) (io.ReadCloser, error) {
	m, ok := t.members[name]
	if !ok {
		return nil, fmt.Errorf("%s: %w in the archive", name, fs.ErrNotExist)
	}
	if !m.regular {
		return nil, fmt.Errorf("%s: not a regular file in the archive", name)
	}
	f, err := os.Open(t.path)
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.NewSectionReader(f, m.offset, m.size), f}, nil
}

// tarMembers lists a tar archive's members by their cleaned names, with
// where each one's bytes lie.
func tarMembers(archive string) (map[string]tarMember, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	members := map[string]tarMember{}
	tr := tar.NewReader(f) // *os.File seeks past the members' bytes
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		// Next leaves the file at the member's first byte.
		offset, err := f.Seek(0, io.SeekCurrent)
		if err != nil {
			return nil, err
		}
		members[path.Clean(strings.TrimPrefix(h.Name, "./"))] = tarMember{offset: offset, size: h.Size, regular: h.Typeflag == tar.TypeReg}
	}
	if len(members) == 0 {
		return nil, errors.New("empty")
	}
	return members, nil
}

func blobName(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }

// readBlob reads a blob whole, at most one byte over the size its
// descriptor gives, so that a blob that is too long is known as such
// without being read to its end.
func readBlob(files layoutFiles, d v1.Descriptor) ([]byte, error) {
	rc, err := files.open(blobName(d.Digest))
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, max(d.Size, 0)+1))
}

// fromLayout picks the image of this host's platform in a layout; where
// names the layout in errors.
func fromLayout(files layoutFiles, where string) (ociSource, error) {
	rc, err := files.open("oci-layout")
	if err != nil {
		// An archive without it is known as such before (openOCI).
		return ociSource{}, fmt.Errorf("%w: %s: a directory without oci-layout is not an OCI image layout", ErrBadOCI, where)
	}
	rc.Close()
	rc, err = files.open("index.json")
	if err != nil {
		return ociSource{}, fmt.Errorf("%w: %s: %v", ErrBadOCI, where, err)
	}
	b, err := io.ReadAll(io.LimitReader(rc, maxIndexBytes+1))
	rc.Close()
	if err == nil && len(b) > maxIndexBytes {
		err = fmt.Errorf("index.json is over %s", regfile.Bytes(maxIndexBytes))
	}
	var idx *v1.IndexManifest
	if err == nil {
		idx, err = v1.ParseIndexManifest(bytes.NewReader(b))
	}
	if err == nil {
		var src ociSource
		if src, err = pickImage(files, idx, 0); err == nil {
			return src, nil
		}
	}
	return ociSource{}, fmt.Errorf("%w: %s: %v", ErrBadOCI, where, err)
}

// pickImage follows an index (and nested indexes, as docker writes them)
// to the one image for this host's platform, each nested index checked
// against the descriptor that names it; the image's manifest is checked
// against its own when it is read (walkOCI).
func pickImage(files layoutFiles, idx *v1.IndexManifest, depth int) (ociSource, error) {
	var fits []v1.Descriptor
	for _, d := range idx.Manifests {
		if p := d.Platform; p != nil && (p.OS != "linux" || p.Architecture != runtime.GOARCH) {
			continue
		}
		if d.MediaType.IsImage() || d.MediaType.IsIndex() {
			fits = append(fits, d)
		}
	}
	switch {
	case len(fits) == 0:
		return ociSource{}, fmt.Errorf("no image for linux/%s in its index (%d entries)", runtime.GOARCH, len(idx.Manifests))
	case len(fits) > 1:
		return ociSource{}, fmt.Errorf("%d images for linux/%s in its index: keep one in the layout", len(fits), runtime.GOARCH)
	case fits[0].MediaType.IsIndex() && depth >= 2:
		return ociSource{}, errors.New("indexes nested more than two deep")
	}
	d := fits[0]
	raw, err := readBlob(files, d)
	if err != nil {
		return ociSource{}, err
	}
	if d.MediaType.IsImage() {
		img, err := partial.CompressedToImage(&layoutImage{files: files, desc: d, raw: raw})
		return ociSource{img: img, desc: &d}, err
	}
	if err := verifyBytes(raw, "index "+d.Digest.String(), d.Digest, d.Size); err != nil {
		return ociSource{}, err
	}
	inner, err := v1.ParseIndexManifest(bytes.NewReader(raw))
	if err != nil {
		return ociSource{}, fmt.Errorf("index %s: %w", d.Digest, err)
	}
	return pickImage(files, inner, depth+1)
}

// layoutImage is an image of a layout as go-containerregistry's partial
// package takes one: its manifest as read, the rest read on demand.
type layoutImage struct {
	files layoutFiles
	desc  v1.Descriptor
	raw   []byte
}

func (li *layoutImage) RawManifest() ([]byte, error)        { return li.raw, nil }
func (li *layoutImage) MediaType() (types.MediaType, error) { return li.desc.MediaType, nil }

func (li *layoutImage) RawConfigFile() ([]byte, error) {
	m, err := v1.ParseManifest(bytes.NewReader(li.raw))
	if err != nil {
		return nil, err
	}
	return readBlob(li.files, m.Config)
}

func (li *layoutImage) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	m, err := v1.ParseManifest(bytes.NewReader(li.raw))
	if err != nil {
		return nil, err
	}
	for _, d := range m.Layers {
		if d.Digest == h {
			return layoutBlob{files: li.files, desc: d}, nil
		}
	}
	return nil, fmt.Errorf("no layer %s in manifest %s", h, li.desc.Digest)
}

// layoutBlob is a layer's blob in a layout.
type layoutBlob struct {
	files layoutFiles
	desc  v1.Descriptor
}

func (b layoutBlob) Digest() (v1.Hash, error)            { return b.desc.Digest, nil }
func (b layoutBlob) Size() (int64, error)                { return b.desc.Size, nil }
func (b layoutBlob) MediaType() (types.MediaType, error) { return b.desc.MediaType, nil }
func (b layoutBlob) Compressed() (io.ReadCloser, error)  { return b.files.open(blobName(b.desc.Digest)) }
