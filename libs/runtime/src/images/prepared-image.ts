import type { OciMount } from '../oci/oci-spec.js';
import type { UserSpec } from '../types.js';

/** An image ready to run: an unpacked root filesystem shared read-only by its containers. */
export interface PreparedImage {
  ref: string;
  /** `sha256:…`: the manifest digest (OCI) or the hash of the host image's recipe. */
  digest: string;
  rootfs: string;
  /** Read-only binds the image needs at run time (the host image's /usr, …). */
  mounts: OciMount[];
  /** `KEY=value` from the image config. */
  env: string[];
  entrypoint: string[];
  cmd: string[];
  cwd?: string;
  /** The image's USER, resolved to numbers; absent when it names none. */
  user?: UserSpec;
  /** The image already sees the host's /usr, so host driver libraries need no extra mounts. */
  sharesHostUsr: boolean;
}
