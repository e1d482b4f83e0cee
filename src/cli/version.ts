import { readFileSync } from 'node:fs';

// `converge --version`: the package's version and the git commit of the build, which
// scripts/bundle.mjs writes beside the bundle (buildInfo.json). Run from the sources (tsx, the
// in-process tests) there is no build: the version comes from package.json, the commit is unknown.

export type BuildInfo = Readonly<{ version: string; commit: string }>;

const readJson = (url: URL): unknown => {
  try {
    return JSON.parse(readFileSync(url, 'utf8')) as unknown;
  } catch {
    return null;
  }
};

export function buildInfo(): BuildInfo {
  const built = readJson(new URL('./buildInfo.json', import.meta.url)) as Partial<BuildInfo> | null;
  if (typeof built?.version === 'string' && typeof built.commit === 'string') return { version: built.version, commit: built.commit };
  const pkg = readJson(new URL('../../package.json', import.meta.url)) as { version?: unknown } | null;
  return { version: typeof pkg?.version === 'string' ? pkg.version : 'unknown', commit: 'unknown' };
}

export const versionLine = ({ version, commit }: BuildInfo): string => `converge ${version} (commit ${commit})\n`;
