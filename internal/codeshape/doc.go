// Package codeshape holds no code: its tests keep the repository's shape,
// read from the source as the compiler's parser sees it. At most
// MaxLongFunctions non-test functions are longer than LongFunction lines
// unless a "// long: reads as one story because ..." comment says why, and
// docs/architecture.md names every package directory.
package codeshape

// LongFunction is the length in lines (from the func keyword to the
// closing brace) above which a non-test function needs a reason.
const LongFunction = 80

// MaxLongFunctions is how many non-test functions may exceed LongFunction
// without a reason.
const MaxLongFunctions = 5

// LongMarker starts the comment (in the function's doc comment or on the
// line above it) that lets a function exceed LongFunction: the rest of the
// line says why it reads as one story.
const LongMarker = "// long: reads as one story because "
