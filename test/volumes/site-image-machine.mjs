// One machine of a site in test/volumes/site-cache.test.ts pulling an image, run inside the
// site's network namespace: learns which registry the site cache fronts and pulls the image by
// digest with the agent's own code (SiteCacheFront, pullRegistryImage), then prints how long it
// took and what fell back to the registry, as JSON.
// Environment: REGISTRY (host:port), SITE_CACHE, TOKEN, REF (host/repo@sha256:…), DIR.
import { pullRegistryImage } from '#tern/runtime';
import { SiteCacheFront } from '../../dist/apps/agent/src/containers/site-cache-front.js';

const { REGISTRY, SITE_CACHE, TOKEN, REF, DIR } = process.env;
const fellBack = [];
const front = new SiteCacheFront(SITE_CACHE, (message) => fellBack.push(message));
const access = await front.through([{ host: REGISTRY, insecure: true, token: TOKEN }]);
const began = Date.now();
const image = await pullRegistryImage(REF, DIR, access);
process.stdout.write(
  `${JSON.stringify({ ms: Date.now() - began, rootfs: image.rootfs, throughCache: !!access[0].siteCache, fellBack })}\n`,
);
