// Package filewatch holds the parsed content of a settings file an
// operator changes while the process runs (the sender's prototype keys,
// the push API's clients): read at start, again on demand (the binaries
// call Reload on SIGHUP), and when the file's size or modification time
// changes (Watch polls its size, modification time and inode). A file that cannot be read or parsed is refused
// and the content in use stays; it is read again only once it changes, or
// on demand, never at every poll.
//
// It must never import the tiers: they import it.
package filewatch
