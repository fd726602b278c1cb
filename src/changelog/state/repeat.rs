//! (filled by the changelog-schema move)
