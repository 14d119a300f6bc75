import "@xyflow/react/dist/style.css";
import "./styles.css";

import { createRoot } from "react-dom/client";

import { App } from "./App";

createRoot(document.getElementById("root")!).render(<App />);
