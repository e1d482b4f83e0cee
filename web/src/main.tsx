import { render } from 'preact';
import { App } from './App.tsx';
import { interceptLinks } from './router.ts';
import './styles.css';

// The operator's dashboard, served by `converge serve` at / and /nodes/:node.
interceptLinks();
render(<App />, document.getElementById('app')!);
