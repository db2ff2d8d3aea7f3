// Package image owns the guest image: a Debian root filesystem with the
// measuring tools and the vfleet agent, which every guest kind uses (the
// bare baseline runs the very same binaries from it; each container gets a
// copy-on-write overlay over it).
//
// Lifecycle: a Recipe is plain data; its hash names the image directory
// (<root>/images/<hash>/). Ensure reuses a complete image of that hash, or
// builds one with mmdebstrap into a temporary directory beside it and
// renames it into place only on success, so an interrupted build never
// leaves a half image. Builds are serialised by a lock file. The agent is
// installed (copied) whenever its checksum changes, without a rebuild.
package image
